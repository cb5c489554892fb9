//! An epoch's [`Tag`]: its loop's serial and its index in loop order, in one word.

/// An epoch's identity: `serial << 32 | index`.
pub(crate) type Tag = u64;

/// Builds the tag of epoch `index` of loop `serial`.
pub(crate) fn make_tag(serial: u32, index: u64) -> Tag {
    (u64::from(serial) << 32) | (index & 0xffff_ffff)
}

/// The loop serial of a tag.
pub(crate) fn serial_of(tag: Tag) -> u32 {
    (tag >> 32) as u32
}

/// The epoch index of a tag.
pub(crate) fn index_of(tag: Tag) -> u64 {
    tag & 0xffff_ffff
}
