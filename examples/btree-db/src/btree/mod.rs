//! The Lehman-Yao B-link tree over the buffer pool, plus page allocation.
//!
//! Searches hold one latch at a time and move right whenever the key is at
//! or above a node's high key, so they never block on a split in progress.
//! An insert latches its leaf exclusively (moving right with latch coupling,
//! left to right), and a full node is split in two atomic steps, each one
//! log record: the *half split* (new right sibling, shortened left node with
//! its new high key and right link) and later the *separator post* into the
//! parent, found by a fresh descent. Between the two, and even if a crash
//! falls between them, the tree is valid: the new node is reachable through
//! its left sibling's right link. The root page never moves: a full root
//! copies its cells into two new children and becomes their parent, so
//! catalog entries never change.
//!
//! Deletes remove cells without merging (nodes may become empty); pages of
//! dropped tables go to the free list and are reused by later allocations.
//!
//! | file | what |
//! | --- | --- |
//! | `store` | [`Store`] (buffer pool plus log), the log seam, the change and logging types |
//! | `alloc` | the meta page, page allocation and the free list, creating and freeing trees |
//! | `tree` | descent, move-right, point reads, key changes, half splits, separator posting |
//! | `check` | tree height and the structural check of a whole tree |
//! | `cursor` | [`CursorState`], a forward cursor's position |
//!
//! Each file adds its operations to `Store`; redo of logged page operations
//! is in `crate::recovery`.

mod alloc;
mod check;
mod cursor;
mod store;
mod tree;

pub(crate) use alloc::{CATALOG_ROOT, META_PAGE};
pub(crate) use cursor::CursorState;
pub(crate) use store::{LogCtx, LogMode, Modify, Outcome, Store, check_node, corrupt};
