//! The path into the runtime that every generated item goes through.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};

/// `::tls_runtime::__private`.
pub(super) fn rt() -> TokenStream {
    quote!(::tls_runtime::__private)
}

/// The same path with `span`, so that an unmet bound of a helper is reported on the
/// user's tokens.
pub(super) fn rt_at(span: Span) -> TokenStream {
    quote_spanned!(span=> ::tls_runtime::__private)
}
