//! EchoMQ's ten scripts, built into the binary from `lua/` when it is compiled (cargo feature
//! `embedded-lua`, on by default), so an installed `emq-bench` runs from any directory;
//! `--lua-dir` still reads others (a user's edited scripts). BullMQ's scripts are never built
//! in: they are another project's code, fetched and pinned by `scripts/setup`.
//!
//! Without the feature [`ECHOMQ`] is empty and a run needs `--lua-dir`; then an edit of `lua/`
//! does not rebuild the binary, which is what the script-cost gate (`scripts/regress`) wants.

/// The name a registry of the built-in scripts gives as its directory (summary.json's
/// `target.lua_dir`).
pub const BUILTIN: &str = "built-in";

/// `(file name, source)` of every EchoMQ script, as `lua/` held them at compile time.
#[cfg(feature = "embedded-lua")]
pub const ECHOMQ: &[(&str, &str)] = &[
    ("clean.lua", include_str!("../../lua/clean.lua")),
    ("claim.lua", include_str!("../../lua/claim.lua")),
    ("complete.lua", include_str!("../../lua/complete.lua")),
    ("enqueue.lua", include_str!("../../lua/enqueue.lua")),
    ("enqueue_delayed.lua", include_str!("../../lua/enqueue_delayed.lua")),
    ("extend.lua", include_str!("../../lua/extend.lua")),
    ("fail.lua", include_str!("../../lua/fail.lua")),
    ("progress.lua", include_str!("../../lua/progress.lua")),
    ("promote.lua", include_str!("../../lua/promote.lua")),
    ("reap.lua", include_str!("../../lua/reap.lua")),
];

/// None: built without the cargo feature `embedded-lua` (see the module's doc).
#[cfg(not(feature = "embedded-lua"))]
pub const ECHOMQ: &[(&str, &str)] = &[];
