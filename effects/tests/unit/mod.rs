//! The unit tests of `src/`, one module per file there, with the same test names.

mod access;
mod connect;
mod error;
mod inspect;
mod job;
mod progress;
mod retry;
