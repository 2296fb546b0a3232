//! `refinery::embed_migrations!` reads `migrations/` at compile time, but
//! cargo does not know the crate depends on that directory: a new migration
//! file alone would not rebuild the store, and the binary would miss it.
//! Watching the directory here makes cargo rebuild when it changes.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
