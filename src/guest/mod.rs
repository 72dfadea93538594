//! Linux test guest: image builder wrapper and QEMU runner.
