//! Compiles `proto/inquest/v1/*.proto` with protox (pure Rust, so no `protoc`
//! is needed anywhere), writes the descriptor set that server reflection
//! serves, and generates the one table of the service's methods ([`Rpc`]
//! in `rpc.rs`) from that same descriptor set.

use std::{env, fmt::Write as _, fs, path::PathBuf};

use prost::Message;
use prost_reflect::{DescriptorPool, Value};

const SERVICE: &str = "inquest.v1.Investigations";
const ROLE_OPTION: &str = "inquest.v1.required_role";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let mut files = Vec::new();
    for entry in fs::read_dir(root.join("inquest/v1"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "proto") {
            println!("cargo:rerun-if-changed={}", path.display());
            files.push(path);
        }
    }
    files.sort();
    let mut compiler = protox::Compiler::new([&root])?;
    compiler
        .include_source_info(true)
        .include_imports(true)
        .open_files(&files)?;
    let fds = compiler.file_descriptor_set();
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("inquest_descriptor.bin"), fds.encode_to_vec())?;
    fs::write(out.join("rpc.rs"), rpc_table(&compiler.descriptor_pool())?)?;
    tonic_prost_build::configure().compile_fds(fds.clone())?;

    // The server side again, with one difference: `WatchSession` streams
    // `crate::EncodedWatchEvent` (bytes encoded once, sent to every watcher
    // as they are) instead of `WatchEvent`. Messages are not generated
    // again: every other type resolves to `crate::v1`.
    let mut services_only = fds;
    for file in &mut services_only.file {
        file.message_type.clear();
        file.enum_type.clear();
    }
    let encoded = out.join("encoded");
    fs::create_dir_all(&encoded)?;
    tonic_prost_build::configure()
        .build_client(false)
        .out_dir(&encoded)
        .extern_path(".inquest.v1", "crate::v1")
        .extern_path(".inquest.v1.WatchEvent", "crate::EncodedWatchEvent")
        .compile_fds(services_only)?;
    Ok(())
}

/// The `Rpc` enum: one variant per method of the service, each with its
/// path, its metrics label and the role its `required_role` option names.
/// A method without that option fails the build here.
fn rpc_table(pool: &DescriptorPool) -> Result<String, Box<dyn std::error::Error>> {
    let service = pool
        .get_service_by_name(SERVICE)
        .ok_or_else(|| format!("{SERVICE} is not in the protos"))?;
    let option = pool
        .get_extension_by_name(ROLE_OPTION)
        .ok_or_else(|| format!("the {ROLE_OPTION} method option is not declared"))?;
    let roles = option
        .kind()
        .as_enum()
        .cloned()
        .ok_or_else(|| format!("{ROLE_OPTION} is not an enum"))?;

    let mut methods = Vec::new();
    for method in service.methods() {
        let options = method.options();
        let role = match options.get_extension(&option).as_ref() {
            Value::EnumNumber(n) if options.has_extension(&option) => *n,
            _ => 0,
        };
        let role = roles
            .get_value(role)
            .filter(|v| v.number() != 0)
            .ok_or_else(|| {
                format!(
                    "rpc {} has no `option ({ROLE_OPTION}) = …;`: every method must say which \
                     role may call it",
                    method.name()
                )
            })?;
        // REQUIRED_ROLE_OPERATOR → Operator, the prost name of the value.
        let variant = role
            .name()
            .strip_prefix("REQUIRED_ROLE_")
            .ok_or_else(|| format!("{} is not a REQUIRED_ROLE_ value", role.name()))?;
        let variant = pascal(variant);
        methods.push((
            method.name().to_owned(),
            variant,
            method.is_server_streaming(),
        ));
    }

    let mut code = String::new();
    writeln!(
        code,
        "/// A method of `{SERVICE}`, generated from the proto: the one list of"
    )?;
    writeln!(
        code,
        "/// the service's methods that authorisation, `/metrics` and the tests read."
    )?;
    writeln!(
        code,
        "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]"
    )?;
    writeln!(code, "pub enum Rpc {{")?;
    for (name, _, _) in &methods {
        writeln!(code, "    {name},")?;
    }
    writeln!(code, "}}\n\nimpl Rpc {{")?;
    writeln!(code, "    /// The service's full name.")?;
    writeln!(code, "    pub const SERVICE: &'static str = {SERVICE:?};")?;
    writeln!(code, "    /// Every method, in the proto's order.")?;
    writeln!(code, "    pub const ALL: [Rpc; {}] = [", methods.len())?;
    for (name, _, _) in &methods {
        writeln!(code, "        Rpc::{name},")?;
    }
    writeln!(code, "    ];\n")?;
    let arms = |f: &dyn Fn(&str, &str, bool) -> String| -> String {
        methods
            .iter()
            .map(|(n, r, s)| format!("            Rpc::{n} => {},\n", f(n, r, *s)))
            .collect()
    };
    writeln!(
        code,
        "    /// The method's name, as in the proto; also its `/metrics` label."
    )?;
    writeln!(
        code,
        "    pub const fn name(self) -> &'static str {{\n        match self {{\n{}        }}\n    }}\n",
        arms(&|n, _, _| format!("{n:?}"))
    )?;
    writeln!(
        code,
        "    /// The HTTP/2 path a call of the method is sent to."
    )?;
    writeln!(
        code,
        "    pub const fn path(self) -> &'static str {{\n        match self {{\n{}        }}\n    }}\n",
        arms(&|n, _, _| format!("{:?}", format!("/{SERVICE}/{n}")))
    )?;
    writeln!(
        code,
        "    /// The least role that may call the method (its `required_role` option)."
    )?;
    writeln!(
        code,
        "    pub const fn required_role(self) -> crate::v1::RequiredRole {{\n        match self {{\n{}        }}\n    }}\n",
        arms(&|_, r, _| format!("crate::v1::RequiredRole::{r}"))
    )?;
    writeln!(code, "    /// Whether the server answers with a stream.")?;
    writeln!(
        code,
        "    pub const fn server_streaming(self) -> bool {{\n        match self {{\n{}        }}\n    }}\n",
        arms(&|_, _, s| s.to_string())
    )?;
    writeln!(
        code,
        "    /// The method a request path names, if it is one of this service's."
    )?;
    writeln!(
        code,
        "    pub fn from_path(path: &str) -> Option<Rpc> {{\n        Rpc::ALL.into_iter().find(|rpc| rpc.path() == path)\n    }}\n"
    )?;
    writeln!(code, "    /// The method named `name` (as in the proto).")?;
    writeln!(
        code,
        "    pub fn from_name(name: &str) -> Option<Rpc> {{\n        Rpc::ALL.into_iter().find(|rpc| rpc.name() == name)\n    }}"
    )?;
    writeln!(code, "}}")?;
    Ok(code)
}

fn pascal(upper_snake: &str) -> String {
    upper_snake
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_string() + &chars.as_str().to_ascii_lowercase()
            })
        })
        .collect()
}
