//! Procedural macros of the tls toolkit (being written).

use proc_macro::TokenStream;

/// Runs the function's `for` loop as speculative epochs.
#[proc_macro_attribute]
pub fn tls_loop(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Runs the function non-speculatively.
#[proc_macro_attribute]
pub fn escape(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Registers an undo action for an escaped call.
#[proc_macro_attribute]
pub fn on_violation(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Delays the call until commit.
#[proc_macro_attribute]
pub fn on_commit(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// A sub-thread boundary inside a `#[tls_loop]` body.
#[proc_macro]
pub fn checkpoint(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
