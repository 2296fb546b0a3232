//! Opening files without leaving a root directory.
//!
//! The built-in file tools take paths from the model, so a path must not
//! reach outside `files_root` through `..`, an absolute path or a symbolic
//! link, and a link swapped in between a check and the open must not either.
//! So nothing here checks a path and then opens it: every open is resolved
//! by the kernel relative to a descriptor of the root, with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (Linux ≥ 5.6). A link
//! that stays inside the root is followed; one that leaves it fails with
//! `EXDEV`. On a kernel without `openat2` every component is opened with
//! `O_NOFOLLOW` instead, which refuses every link (stricter, never looser).
//!
//! Only regular files are read: a FIFO, a device or a socket under the root
//! is refused after the open (opened non-blocking, so a FIFO with no writer
//! cannot hang the call), and directories are walked through their own
//! descriptors, so the walk never follows a link out either.

use std::{
    ffi::OsStr,
    fs::File,
    io,
    os::{fd::OwnedFd, unix::ffi::OsStrExt},
    path::{Component, Path},
};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

/// What went wrong opening a path under the root, in words for the model.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    #[error("path {0:?} must be relative to the evidence root, without `..`")]
    NotRelative(String),
    #[error("path {0:?} leaves the evidence root (through a symbolic link)")]
    Escapes(String),
    #[error(
        "path {0:?} goes through a symbolic link, which is not followed on this kernel (no openat2)"
    )]
    Link(String),
    #[error("{0} is a {1}, not a regular file")]
    NotRegular(String, &'static str),
    #[error("{0} is a directory")]
    Directory(String),
    #[error("cannot open {0}: {1}")]
    Io(String, io::Error),
}

/// A directory every open is resolved beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
}

/// What a directory walk found: paths relative to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walked {
    pub files: Vec<String>,
    /// Entries not listed because the walk stopped at its bound.
    pub truncated: bool,
}

impl Root {
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { fd })
    }

    /// Opens the regular file at `relative` for reading.
    pub fn open_file(&self, relative: &str) -> Result<File, BeneathError> {
        let fd = self.open_beneath(relative, OFlags::empty())?;
        let stat =
            rustix::fs::fstat(&fd).map_err(|e| BeneathError::Io(relative.into(), e.into()))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Ok(File::from(fd)),
            FileType::Directory => Err(BeneathError::Directory(relative.into())),
            other => Err(BeneathError::NotRegular(relative.into(), kind(other))),
        }
    }

    /// Every regular file under the root (links followed only while they
    /// stay inside it, directories behind links not entered), sorted, at
    /// most `max` of them.
    pub fn walk(&self, max: usize) -> Result<Walked, BeneathError> {
        let mut files = Vec::new();
        let mut truncated = false;
        let mut stack = vec![String::new()];
        while let Some(dir) = stack.pop() {
            let fd = if dir.is_empty() {
                self.fd
                    .try_clone()
                    .map_err(|e| BeneathError::Io(".".into(), e))?
            } else {
                match self.open_beneath(&dir, OFlags::DIRECTORY) {
                    Ok(fd) => fd,
                    // Swapped or removed since it was listed: skip it.
                    Err(_) => continue,
                }
            };
            let entries =
                rustix::fs::Dir::new(fd).map_err(|e| BeneathError::Io(display(&dir), e.into()))?;
            for entry in entries {
                let Ok(entry) = entry else { break };
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "." || name == ".." {
                    continue;
                }
                let rel = if dir.is_empty() {
                    name.to_string_lossy().into_owned()
                } else {
                    format!("{dir}/{}", name.to_string_lossy())
                };
                let listed = match entry.file_type() {
                    FileType::Directory => {
                        stack.push(rel);
                        continue;
                    }
                    FileType::RegularFile => true,
                    // A link is listed when it names a regular file inside
                    // the root; what it names is read through the same
                    // confined open, so listing it shows nothing outside.
                    FileType::Symlink | FileType::Unknown => self.open_file(&rel).is_ok(),
                    _ => false,
                };
                if listed {
                    if files.len() == max {
                        truncated = true;
                        break;
                    }
                    files.push(rel);
                }
            }
            if truncated {
                break;
            }
        }
        files.sort();
        Ok(Walked { files, truncated })
    }

    fn open_beneath(&self, relative: &str, extra: OFlags) -> Result<OwnedFd, BeneathError> {
        let path = Path::new(relative);
        if relative.is_empty()
            || path
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(BeneathError::NotRelative(relative.into()));
        }
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY | extra;
        let opened = rustix::fs::openat2(
            &self.fd,
            path,
            flags,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        );
        match opened {
            Ok(fd) => Ok(fd),
            Err(rustix::io::Errno::XDEV) => Err(BeneathError::Escapes(relative.into())),
            Err(rustix::io::Errno::NOSYS) => self.open_without_links(path, flags, relative),
            Err(e) => Err(BeneathError::Io(relative.into(), e.into())),
        }
    }

    /// The fallback without `openat2`: one component at a time, none of
    /// them a link.
    fn open_without_links(
        &self,
        path: &Path,
        flags: OFlags,
        relative: &str,
    ) -> Result<OwnedFd, BeneathError> {
        let parts: Vec<&OsStr> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(p) => Some(p),
                _ => None,
            })
            .collect();
        // `O_NOFOLLOW` on a link fails with ELOOP, and with ENOTDIR beside
        // `O_DIRECTORY`: ask which it was before blaming a link.
        let io_err = |dir: &OwnedFd, part: &OsStr, e: rustix::io::Errno| {
            let link = rustix::fs::statat(dir, part, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
            if link {
                BeneathError::Link(relative.into())
            } else {
                BeneathError::Io(relative.into(), e.into())
            }
        };
        let Some((last, dirs)) = parts.split_last() else {
            return Err(BeneathError::NotRelative(relative.into()));
        };
        let mut dir = self
            .fd
            .try_clone()
            .map_err(|e| BeneathError::Io(relative.into(), e))?;
        for part in dirs {
            dir = rustix::fs::openat(
                &dir,
                *part,
                OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io_err(&dir, part, e))?;
        }
        rustix::fs::openat(&dir, *last, flags | OFlags::NOFOLLOW, Mode::empty())
            .map_err(|e| io_err(&dir, last, e))
    }
}

fn display(dir: &str) -> String {
    if dir.is_empty() {
        ".".into()
    } else {
        dir.into()
    }
}

fn kind(t: FileType) -> &'static str {
    match t {
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Symlink => "symbolic link",
        _ => "special file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{io::Read, os::unix::fs::symlink};

    struct Dirs {
        base: std::path::PathBuf,
    }

    impl Dirs {
        fn new() -> Self {
            let base = std::env::temp_dir().join(format!("inquest-beneath-{}", uuid_like()));
            std::fs::create_dir_all(base.join("root/logs")).unwrap();
            std::fs::create_dir_all(base.join("outside")).unwrap();
            std::fs::write(base.join("root/logs/app.log"), "inside\n").unwrap();
            std::fs::write(base.join("outside/secret.txt"), "SECRET\n").unwrap();
            Self { base }
        }
        fn root(&self) -> std::path::PathBuf {
            self.base.join("root")
        }
    }

    impl Drop for Dirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }

    fn uuid_like() -> String {
        format!(
            "{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        )
    }

    fn read(root: &Root, rel: &str) -> Result<String, BeneathError> {
        let mut s = String::new();
        root.open_file(rel)?.read_to_string(&mut s).unwrap();
        Ok(s)
    }

    #[test]
    fn dot_dot_absolute_and_links_out_are_refused() {
        let d = Dirs::new();
        symlink(d.base.join("outside"), d.root().join("out")).unwrap();
        symlink("../outside/secret.txt", d.root().join("rel_out")).unwrap();
        symlink("logs/app.log", d.root().join("in_link")).unwrap();
        let root = Root::open(&d.root()).unwrap();
        assert_eq!(read(&root, "logs/app.log").unwrap(), "inside\n");
        assert_eq!(read(&root, "in_link").unwrap(), "inside\n");
        assert!(matches!(
            read(&root, "../outside/secret.txt"),
            Err(BeneathError::NotRelative(_))
        ));
        let abs = d.base.join("outside/secret.txt");
        assert!(matches!(
            read(&root, abs.to_str().unwrap()),
            Err(BeneathError::NotRelative(_))
        ));
        assert!(matches!(
            read(&root, "out/secret.txt"),
            Err(BeneathError::Escapes(_))
        ));
        assert!(matches!(
            read(&root, "rel_out"),
            Err(BeneathError::Escapes(_))
        ));
        let walked = root.walk(100).unwrap();
        assert_eq!(walked.files, vec!["in_link", "logs/app.log"]);
    }

    #[test]
    fn fifos_and_directories_are_refused_without_blocking() {
        let d = Dirs::new();
        let fifo = d.root().join("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let root = Root::open(&d.root()).unwrap();
        assert!(matches!(
            root.open_file("pipe"),
            Err(BeneathError::NotRegular(_, "FIFO"))
        ));
        assert!(matches!(
            root.open_file("logs"),
            Err(BeneathError::Directory(_))
        ));
        assert_eq!(root.walk(100).unwrap().files, vec!["logs/app.log"]);
    }

    #[test]
    fn a_link_swapped_during_reads_never_reaches_outside() {
        let d = Dirs::new();
        let link = d.root().join("flip");
        symlink("logs/app.log", &link).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flipper = {
            let (stop, link, outside) = (stop.clone(), link.clone(), d.base.join("outside"));
            std::thread::spawn(move || {
                let tmp = link.with_extension("tmp");
                let mut out = false;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::remove_file(&tmp);
                    let target = if out {
                        outside.join("secret.txt")
                    } else {
                        "logs/app.log".into()
                    };
                    symlink(&target, &tmp).unwrap();
                    std::fs::rename(&tmp, &link).unwrap();
                    out = !out;
                }
            })
        };
        let root = Root::open(&d.root()).unwrap();
        let (mut inside, mut refused, mut reads) = (0, 0, 0);
        // At least 5,000 reads, and on until both sides of the race were
        // seen: on a loaded machine the flipper may not be scheduled for a
        // while. Bounded, so a broken race fails instead of hanging.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while reads < 5_000
            || ((inside == 0 || refused == 0) && std::time::Instant::now() < give_up)
        {
            reads += 1;
            match read(&root, "flip") {
                Ok(text) => {
                    assert_eq!(text, "inside\n", "a swapped link leaked the outside");
                    inside += 1;
                }
                Err(BeneathError::Escapes(_)) => refused += 1,
                Err(BeneathError::Io(..)) => {}
                Err(e) => panic!("unexpected {e}"),
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        flipper.join().unwrap();
        assert!(
            inside > 0 && refused > 0,
            "both sides of the race were seen"
        );
    }

    /// The path taken on a kernel without `openat2`: every link refused.
    #[test]
    fn without_openat2_no_link_is_followed() {
        let d = Dirs::new();
        symlink(d.base.join("outside"), d.root().join("out")).unwrap();
        symlink("logs/app.log", d.root().join("in_link")).unwrap();
        let root = Root::open(&d.root()).unwrap();
        let open = |rel: &str| {
            root.open_without_links(Path::new(rel), OFlags::RDONLY | OFlags::CLOEXEC, rel)
        };
        assert!(open("logs/app.log").is_ok());
        assert!(matches!(open("out/secret.txt"), Err(BeneathError::Link(_))));
        assert!(matches!(open("in_link"), Err(BeneathError::Link(_))));
    }

    #[test]
    fn the_walk_stops_at_its_bound() {
        let d = Dirs::new();
        for i in 0..10 {
            std::fs::write(d.root().join(format!("f{i}")), "x").unwrap();
        }
        let root = Root::open(&d.root()).unwrap();
        let w = root.walk(4).unwrap();
        assert_eq!(w.files.len(), 4);
        assert!(w.truncated);
    }
}
