//! `expect` assertions: `trimmed.write_bw >= 0.9 * fresh.write_bw`.
//!
//! Grammar: one comparison (`<`, `<=`, `>`, `>=`, `==`, `!=`) between two
//! arithmetic expressions over numbers (`0.9`, `1e6`, `200M` meaning
//! 200·10⁶), `phase.metric` references, `+ - * /`, unary minus,
//! parentheses and `abs(e)`. Parsed when the scenario is loaded (so mistakes are
//! reported before anything boots), evaluated after the run.

use std::fmt;

/// A parsed assertion.
#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    /// The text as written.
    pub text: String,
    lhs: Expr,
    op: Cmp,
    rhs: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl fmt::Display for Cmp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
        })
    }
}

/// An arithmetic expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A number.
    Num(f64),
    /// `phase.metric`.
    Ref(String, String),
    /// `-e`.
    Neg(Box<Expr>),
    /// `a op b` with op one of `+ - * /`.
    Bin(Box<Expr>, char, Box<Expr>),
    /// `abs(e)`.
    Abs(Box<Expr>),
}

/// What went wrong with an assertion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExprError(pub String);

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Op(char),
    Cmp(Cmp),
    Open,
    Close,
}

fn tokens(s: &str) -> Result<Vec<Tok>, ExprError> {
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_digit()
                    || b[i] == '.'
                    || ((b[i] == 'e' || b[i] == 'E')
                        && b.get(i + 1)
                            .is_some_and(|d| d.is_ascii_digit() || *d == '-' || *d == '+'))
                    || ((b[i] == '-' || b[i] == '+')
                        && i > start
                        && (b[i - 1] == 'e' || b[i - 1] == 'E')))
            {
                i += 1;
            }
            let text: String = b[start..i].iter().collect();
            let mut v: f64 = text
                .parse()
                .map_err(|_| ExprError(format!("bad number {text:?}")))?;
            // SI suffixes: k, M, G (powers of 1000).
            if let Some(&s) = b.get(i)
                && !b
                    .get(i + 1)
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                let m = match s {
                    'k' | 'K' => Some(1e3),
                    'M' => Some(1e6),
                    'G' => Some(1e9),
                    _ => None,
                };
                if let Some(m) = m {
                    v *= m;
                    i += 1;
                }
            }
            out.push(Tok::Num(v));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len()
                && (b[i].is_alphanumeric() || b[i] == '_' || b[i] == '-' || b[i] == '.')
            {
                i += 1;
            }
            out.push(Tok::Ident(b[start..i].iter().collect()));
        } else if "+-*/".contains(c) {
            out.push(Tok::Op(c));
            i += 1;
        } else if c == '(' {
            out.push(Tok::Open);
            i += 1;
        } else if c == ')' {
            out.push(Tok::Close);
            i += 1;
        } else if "<>=!".contains(c) {
            let two = b.get(i + 1) == Some(&'=');
            let cmp = match (c, two) {
                ('<', true) => Cmp::Le,
                ('<', false) => Cmp::Lt,
                ('>', true) => Cmp::Ge,
                ('>', false) => Cmp::Gt,
                ('=', true) => Cmp::Eq,
                ('!', true) => Cmp::Ne,
                _ => {
                    return Err(ExprError(format!(
                        "unexpected {c:?} (comparisons: < <= > >= == !=)"
                    )));
                }
            };
            out.push(Tok::Cmp(cmp));
            i += if two { 2 } else { 1 };
        } else {
            return Err(ExprError(format!("unexpected character {c:?}")));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn expr(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.term()?;
        while let Some(Tok::Op(c @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            e = Expr::Bin(Box::new(e), c, Box::new(self.term()?));
        }
        Ok(e)
    }

    fn term(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.factor()?;
        while let Some(Tok::Op(c @ ('*' | '/'))) = self.peek().cloned() {
            self.pos += 1;
            e = Expr::Bin(Box::new(e), c, Box::new(self.factor()?));
        }
        Ok(e)
    }

    fn factor(&mut self) -> Result<Expr, ExprError> {
        match self.next() {
            Some(Tok::Num(v)) => Ok(Expr::Num(v)),
            Some(Tok::Op('-')) => Ok(Expr::Neg(Box::new(self.factor()?))),
            Some(Tok::Open) => {
                let e = self.expr()?;
                match self.next() {
                    Some(Tok::Close) => Ok(e),
                    _ => Err(ExprError("missing )".into())),
                }
            }
            Some(Tok::Ident(id)) if id == "abs" && self.peek() == Some(&Tok::Open) => {
                self.pos += 1;
                let e = self.expr()?;
                match self.next() {
                    Some(Tok::Close) => Ok(Expr::Abs(Box::new(e))),
                    _ => Err(ExprError("missing ) after abs(".into())),
                }
            }
            Some(Tok::Ident(id)) => match id.split_once('.') {
                Some((p, m)) if !p.is_empty() && !m.is_empty() && !m.contains('.') => {
                    Ok(Expr::Ref(p.into(), m.into()))
                }
                _ => Err(ExprError(format!(
                    "{id:?}: refer to a figure as PHASE.METRIC, e.g. fresh.write_bw"
                ))),
            },
            Some(t) => Err(ExprError(format!("unexpected {t:?}"))),
            None => Err(ExprError("expression ends too early".into())),
        }
    }
}

fn eval(e: &Expr, get: &dyn Fn(&str, &str) -> Option<f64>) -> Result<f64, ExprError> {
    Ok(match e {
        Expr::Num(v) => *v,
        Expr::Ref(p, m) => get(p, m).ok_or_else(|| ExprError(format!("{p}.{m} has no value")))?,
        Expr::Neg(x) => -eval(x, get)?,
        Expr::Abs(x) => eval(x, get)?.abs(),
        Expr::Bin(a, op, b) => {
            let (a, b) = (eval(a, get)?, eval(b, get)?);
            match op {
                '+' => a + b,
                '-' => a - b,
                '*' => a * b,
                _ => a / b,
            }
        }
    })
}

/// Whether an expression is a bandwidth (it refers to a `*_bw` metric,
/// bytes per second).
fn is_rate(e: &Expr) -> bool {
    match e {
        Expr::Num(_) => false,
        Expr::Ref(_, m) => m.ends_with("_bw"),
        Expr::Neg(x) | Expr::Abs(x) => is_rate(x),
        Expr::Bin(a, _, b) => is_rate(a) || is_rate(b),
    }
}

fn show(e: &Expr, get: &dyn Fn(&str, &str) -> Option<f64>) -> String {
    let v = eval(e, get)
        .map(|v| {
            if is_rate(e) {
                format!("{} MB/s", crate::numfmt::fmt_num(v / 1e6, 1))
            } else {
                fmt_num(v)
            }
        })
        .unwrap_or_else(|_| "?".into());
    match e {
        Expr::Num(_) => v,
        _ => format!("{} = {v}", expr_text(e)),
    }
}

fn expr_text(e: &Expr) -> String {
    match e {
        Expr::Num(v) => fmt_num(*v),
        Expr::Ref(p, m) => format!("{p}.{m}"),
        Expr::Neg(x) => format!("-{}", expr_text(x)),
        Expr::Abs(x) => format!("abs({})", expr_text(x)),
        Expr::Bin(a, op, b) => {
            // Parentheses where the text would otherwise read differently.
            let low = |e: &Expr| matches!(e, Expr::Bin(_, '+' | '-', _));
            let side = |e: &Expr, right: bool| {
                let wrap = match op {
                    '*' | '/' => low(e) || (right && matches!(e, Expr::Bin(..))),
                    '-' => right && low(e),
                    _ => false,
                };
                if wrap {
                    format!("({})", expr_text(e))
                } else {
                    expr_text(e)
                }
            };
            format!("{} {op} {}", side(a, false), side(b, true))
        }
    }
}

/// A number as people read it: up to 4 decimals below 10^5, whole with
/// thousands separators above (no `5.1318e7`), scientific only for the
/// tiny.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 || (v.abs() >= 1e-3 && v.abs() < 1e5) {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else if v.abs() >= 1e5 && v.is_finite() {
        crate::numfmt::fmt_num(v, 0)
    } else {
        format!("{v:.4e}")
    }
}

impl Assertion {
    /// Parse `text`.
    pub fn parse(text: &str) -> Result<Assertion, ExprError> {
        let toks = tokens(text)?;
        if toks.iter().filter(|t| matches!(t, Tok::Cmp(_))).count() > 1 {
            return Err(ExprError("one comparison per assertion".into()));
        }
        let at = toks
            .iter()
            .position(|t| matches!(t, Tok::Cmp(_)))
            .ok_or_else(|| ExprError("no comparison (< <= > >= == !=)".into()))?;
        let Tok::Cmp(op) = toks[at] else {
            return Err(ExprError("no comparison".into()));
        };
        let parse_side = |ts: &[Tok], side: &str| -> Result<Expr, ExprError> {
            let mut p = Parser {
                toks: ts.to_vec(),
                pos: 0,
            };
            let e = p
                .expr()
                .map_err(|e| ExprError(format!("{side} side: {e}")))?;
            if p.pos != ts.len() {
                return Err(ExprError(format!(
                    "{side} side: unexpected {:?}",
                    ts[p.pos]
                )));
            }
            Ok(e)
        };
        let lhs = parse_side(&toks[..at], "left")?;
        let rhs = parse_side(&toks[at + 1..], "right")?;
        Ok(Assertion {
            text: text.to_string(),
            lhs,
            op,
            rhs,
        })
    }

    /// The `(phase, metric)` pairs it uses.
    pub fn refs(&self) -> Vec<(String, String)> {
        fn walk(e: &Expr, out: &mut Vec<(String, String)>) {
            match e {
                Expr::Ref(p, m) => out.push((p.clone(), m.clone())),
                Expr::Neg(x) | Expr::Abs(x) => walk(x, out),
                Expr::Bin(a, _, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Expr::Num(_) => {}
            }
        }
        let mut v = Vec::new();
        walk(&self.lhs, &mut v);
        walk(&self.rhs, &mut v);
        v
    }

    /// Evaluate with `get(phase, metric)`: whether it holds, and the
    /// numbers used (e.g. `trimmed.write_bw = 1.95e8 >= 0.9 * fresh.write_bw = 1.76e8`).
    pub fn check(&self, get: &dyn Fn(&str, &str) -> Option<f64>) -> (bool, String) {
        let l = eval(&self.lhs, get);
        let r = eval(&self.rhs, get);
        let detail = format!(
            "{} {} {}",
            show(&self.lhs, get),
            self.op,
            show(&self.rhs, get)
        );
        let ok = match (l, r) {
            (Ok(a), Ok(b)) if a.is_finite() && b.is_finite() => match self.op {
                Cmp::Lt => a < b,
                Cmp::Le => a <= b,
                Cmp::Gt => a > b,
                Cmp::Ge => a >= b,
                Cmp::Eq => a == b,
                Cmp::Ne => a != b,
            },
            _ => false,
        };
        (ok, detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn get(p: &str, m: &str) -> Option<f64> {
        match (p, m) {
            ("fresh", "write_bw") => Some(200e6),
            ("trimmed", "write_bw") => Some(190e6),
            ("used", "write_bw") => Some(50e6),
            _ => None,
        }
    }

    #[test]
    fn parses_and_checks() {
        let a = Assertion::parse("trimmed.write_bw >= 0.9 * fresh.write_bw").unwrap();
        assert_eq!(
            a.refs(),
            vec![
                ("trimmed".into(), "write_bw".into()),
                ("fresh".into(), "write_bw".into())
            ]
        );
        let (ok, d) = a.check(&get);
        assert!(ok, "{d}");
        assert!(d.contains("trimmed.write_bw = 190.0 MB/s"), "{d}");
        assert!(d.contains("0.9 * fresh.write_bw = 180.0 MB/s"), "{d}");
        assert_eq!(fmt_num(51_318_000.0), "51,318,000");
        assert_eq!(fmt_num(0.5), "0.5");
        let a = Assertion::parse("used.write_bw <= (fresh.write_bw - 100M) / 2").unwrap();
        assert!(a.check(&get).0);
        let a = Assertion::parse("used.write_bw > 0.5 * fresh.write_bw").unwrap();
        assert!(!a.check(&get).0);
        let a = Assertion::parse("nope.write_bw > 1").unwrap();
        let (ok, d) = a.check(&get);
        assert!(!ok && d.contains('?'), "{d}");
        assert!(Assertion::parse("-1e3 < 2.5e-1").unwrap().check(&get).0);
    }

    #[test]
    fn abs_is_a_function() {
        let a = Assertion::parse("abs(a.x / b.x - 1) < 0.2").unwrap();
        let get = |p: &str, _: &str| Some(if p == "a" { 90.0 } else { 100.0 });
        assert!(a.check(&get).0);
        let get = |p: &str, _: &str| Some(if p == "a" { 70.0 } else { 100.0 });
        assert!(!a.check(&get).0);
        assert!(Assertion::parse("abs(a.x < 1").is_err());
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (t, want) in [
            ("fresh.write_bw", "no comparison"),
            ("fresh.write_bw > ", "right side"),
            ("write_bw > 3", "PHASE.METRIC"),
            ("a.b > 1 > 2", "one comparison"),
            ("(a.b > 1", "missing )"),
            ("a.b ~ 1", "unexpected"),
            ("a.b => 1", "unexpected"),
        ] {
            let e = Assertion::parse(t).unwrap_err().to_string();
            assert!(e.contains(want), "{t}: {e}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "[ -~]{0,40}") {
            if let Ok(a) = Assertion::parse(&s) {
                let _ = a.check(&get);
            }
        }
    }
}
