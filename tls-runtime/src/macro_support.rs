//! Helpers used only by the code the `tls-macros` attributes generate (traits whose
//! `#[diagnostic::on_unimplemented]` messages name the user's variable, print capture).
