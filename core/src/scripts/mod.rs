//! Job scripts, rendered from parameters as text for `bash -c`.
//!
//! The paths and key names they share with the builders are in [`crate::catalogue`].

pub mod data_sync;
pub mod database;
pub mod image_check;
pub mod tls;

pub use crate::catalogue::data_keys;
pub use crate::catalogue::paths::{
    SECRET_SCRATCH_DIR, SSH_CONF_DIR, SSH_CONFIG_PATH, SSH_KEY_DIR, SSH_KNOWN_HOSTS_PATH,
    SSH_PRIVATE_KEY_PATH,
};
