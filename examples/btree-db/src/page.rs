//! Page layout and the narrow accessor.

/// Reads and writes page bytes at offsets.
pub trait PageAccess {}

/// An owned page buffer.
pub struct PageBuf;

/// Checks that `bytes` decode as a valid page.
pub fn validate_page(bytes: &[u8]) -> crate::Result<()> {
    let _ = bytes;
    todo!()
}
