//! Compiles `proto/inquest/v1/*.proto` with protox (pure Rust, so no `protoc`
//! is needed anywhere), writes the descriptor set that server reflection
//! serves, and generates the one table of the service's methods ([`Rpc`]
//! in `rpc.rs`) from that same descriptor set.

use std::{env, fs, path::PathBuf};

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

/// One method as the table needs it.
struct Method {
    name: String,
    /// The `RequiredRole` variant (`Operator` for `REQUIRED_ROLE_OPERATOR`).
    role: String,
    server_streaming: bool,
}

/// The `Rpc` enum: one variant per method of the service, each with its
/// path, its metrics label and the role its `required_role` option names.
/// A method without that option fails the build here.
fn rpc_table(pool: &DescriptorPool) -> Result<String, Box<dyn std::error::Error>> {
    let methods = methods(pool)?;
    let arms = |value: &dyn Fn(&Method) -> String| -> String {
        methods
            .iter()
            .map(|m| format!("            Rpc::{} => {},\n", m.name, value(m)))
            .collect()
    };
    let variants: String = methods
        .iter()
        .map(|m| format!("    {},\n", m.name))
        .collect();
    let all: String = methods
        .iter()
        .map(|m| format!("        Rpc::{},\n", m.name))
        .collect();
    let names = arms(&|m| format!("{:?}", m.name));
    let paths = arms(&|m| format!("{:?}", format!("/{SERVICE}/{}", m.name)));
    let roles = arms(&|m| format!("crate::v1::RequiredRole::{}", m.role));
    let streaming = arms(&|m| m.server_streaming.to_string());
    let count = methods.len();
    Ok(format!(
        r#"/// A method of `{SERVICE}`, generated from the proto: the one list of
/// the service's methods that authorisation, `/metrics` and the tests read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rpc {{
{variants}}}

impl Rpc {{
    /// The service's full name.
    pub const SERVICE: &'static str = {SERVICE:?};
    /// Every method, in the proto's order.
    pub const ALL: [Rpc; {count}] = [
{all}    ];

    /// The method's name, as in the proto; also its `/metrics` label.
    pub const fn name(self) -> &'static str {{
        match self {{
{names}        }}
    }}

    /// The HTTP/2 path a call of the method is sent to.
    pub const fn path(self) -> &'static str {{
        match self {{
{paths}        }}
    }}

    /// The least role that may call the method (its `required_role` option).
    pub const fn required_role(self) -> crate::v1::RequiredRole {{
        match self {{
{roles}        }}
    }}

    /// Whether the server answers with a stream.
    pub const fn server_streaming(self) -> bool {{
        match self {{
{streaming}        }}
    }}

    /// The method a request path names, if it is one of this service's.
    pub fn from_path(path: &str) -> Option<Rpc> {{
        Rpc::ALL.into_iter().find(|rpc| rpc.path() == path)
    }}

    /// The method named `name` (as in the proto).
    pub fn from_name(name: &str) -> Option<Rpc> {{
        Rpc::ALL.into_iter().find(|rpc| rpc.name() == name)
    }}
}}
"#
    ))
}

/// The service's methods with the role each declares; an error names the
/// first method without one.
fn methods(pool: &DescriptorPool) -> Result<Vec<Method>, Box<dyn std::error::Error>> {
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
        let number = match options.get_extension(&option).as_ref() {
            Value::EnumNumber(n) if options.has_extension(&option) => *n,
            _ => 0,
        };
        let role = roles
            .get_value(number)
            .filter(|v| v.number() != 0)
            .ok_or_else(|| {
                format!(
                    "rpc {} has no `option ({ROLE_OPTION}) = …;`: every method must say which \
                     role may call it",
                    method.name()
                )
            })?;
        let role = role
            .name()
            .strip_prefix("REQUIRED_ROLE_")
            .ok_or_else(|| format!("{} is not a REQUIRED_ROLE_ value", role.name()))?;
        methods.push(Method {
            name: method.name().to_owned(),
            role: pascal(role),
            server_streaming: method.is_server_streaming(),
        });
    }
    Ok(methods)
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
