//! `vssd sim`: fio job files in model time.
