//! Frame storage: where the buffer pool keeps page bytes, and the latched
//! accessors through which they are reached.
//!
//! This module is the swap point for speculation: a frame is a page-sized
//! byte array behind a reader-writer latch, and nothing outside this module
//! sees the array itself, only [`PageRef`] / [`PageMut`], which implement the
//! offset-based [`crate::PageAccess`] / [`crate::PageWrite`] accessor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::page::{impl_page_access, impl_page_write};

/// The bytes of one buffer pool frame, with its latch.
pub(crate) struct FrameData {
    bytes: RwLock<Box<[u8]>>,
}

impl FrameData {
    pub(crate) fn new(page_size: usize) -> FrameData {
        FrameData {
            bytes: RwLock::new(vec![0u8; page_size].into_boxed_slice()),
        }
    }

    /// Takes the shared latch.
    pub(crate) fn read(&self) -> PageRef<'_> {
        PageRef {
            g: self.bytes.read().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Takes the exclusive latch; the frame is marked dirty when it is released.
    pub(crate) fn write<'a>(&'a self, dirty: &'a AtomicBool) -> PageMut<'a> {
        PageMut {
            g: self.bytes.write().unwrap_or_else(PoisonError::into_inner),
            dirty,
        }
    }
}

/// A shared-latched page.
pub(crate) struct PageRef<'a> {
    g: RwLockReadGuard<'a, Box<[u8]>>,
}

/// An exclusively latched page. Dropping it marks the frame dirty while the
/// latch is still held, so a checkpoint that latches the page afterwards
/// always sees the flag.
pub(crate) struct PageMut<'a> {
    g: RwLockWriteGuard<'a, Box<[u8]>>,
    dirty: &'a AtomicBool,
}

impl Drop for PageMut<'_> {
    fn drop(&mut self) {
        // Release pairs with the checkpoint's Acquire swap of the flag.
        self.dirty.store(true, Ordering::Release);
    }
}

impl_page_access!(PageRef<'_>, s => s.g);
impl_page_access!(PageMut<'_>, s => s.g);
impl_page_write!(PageMut<'_>, s => s.g);
