//! What keeps the embedded cluster its owner's alone: the superuser's
//! password (generated, never printed) and the checks that refuse a data
//! directory or password file another local user could write or read.

use std::{fmt, io, path::Path, process::Command};

use super::{EmbeddedError, io_err};

/// The superuser's password; never printed.
#[derive(Clone)]
pub(super) struct Password(pub(super) String);

impl Password {
    /// Two v4 UUIDs from the OS's random source: 244 random bits, as hex
    /// (no character a URL or `pg_hba` would need escaped).
    pub(super) fn generate() -> Self {
        Self(format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ))
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(…)")
    }
}

pub(super) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc_geteuid() == 0 }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// The users a data directory's password file may belong to: this
/// process's user, and `postgres` when running as root (the data directory
/// is handed to it).
pub(super) fn trusted_owners(as_postgres_user: bool) -> Vec<u32> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mut owners = vec![unsafe { libc_geteuid() }];
    if as_postgres_user {
        let id = Command::new("id").args(["-u", "postgres"]).output();
        if let Some(uid) = id
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        {
            owners.push(uid);
        }
    }
    owners
}

/// Refuses a data directory that group or others may write (a planted
/// password file would become the superuser's), and an existing password
/// file that is not `owners`' own or that group or others may read or
/// write. Each refusal says how to fix it.
pub(super) fn check_private(
    data_dir: &Path,
    password_file: &Path,
    owners: &[u32],
) -> Result<(), EmbeddedError> {
    use std::os::unix::fs::MetadataExt;
    let dir =
        std::fs::metadata(data_dir).map_err(io_err(format!("reading {}", data_dir.display())))?;
    if dir.mode() & 0o022 != 0 {
        return Err(EmbeddedError::NotPrivate(format!(
            "the data directory {} is writable by group or others (mode {:o}); another local \
             user could plant its password file. Fix: chmod go-w {}",
            data_dir.display(),
            dir.mode() & 0o7777,
            data_dir.display()
        )));
    }
    let file = match std::fs::symlink_metadata(password_file) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(format!("reading {}", password_file.display()))(e)),
    };
    if !file.file_type().is_file() {
        return Err(EmbeddedError::NotPrivate(format!(
            "{} is not a regular file; remove it (the cluster's password is kept there)",
            password_file.display()
        )));
    }
    if !owners.contains(&file.uid()) {
        return Err(EmbeddedError::NotPrivate(format!(
            "{} belongs to uid {}, not to the user running Inquest; it was not written by \
             Inquest. Remove it if the cluster was never started, or chown it back",
            password_file.display(),
            file.uid()
        )));
    }
    if file.mode() & 0o077 != 0 {
        return Err(EmbeddedError::NotPrivate(format!(
            "{} is readable or writable by group or others (mode {:o}); the superuser's \
             password must be private. Fix: chmod 600 {}",
            password_file.display(),
            file.mode() & 0o7777,
            password_file.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::PathBuf;

    use super::*;
    use crate::embedded::{EmbeddedOptions, EmbeddedPostgres, PASSWORD_FILE};

    /// A fresh private directory under the temp dir, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new() -> Self {
            let dir = std::env::temp_dir().join(format!(
                "inquest-embedded-check-{}",
                uuid::Uuid::new_v4().simple()
            ));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
            Self(dir)
        }

        fn password(&self, mode: u32) -> PathBuf {
            let file = self.0.join(PASSWORD_FILE);
            std::fs::write(&file, "planted").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            file
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn me(path: &Path) -> Vec<u32> {
        vec![std::fs::metadata(path).unwrap().uid()]
    }

    #[test]
    fn a_private_directory_and_password_file_are_accepted() {
        let d = Dir::new();
        let file = d.0.join(PASSWORD_FILE);
        assert!(check_private(&d.0, &file, &me(&d.0)).is_ok(), "no file yet");
        let file = d.password(0o600);
        assert!(check_private(&d.0, &file, &me(&file)).is_ok());
    }

    #[test]
    fn a_password_file_others_can_read_is_refused_with_the_fix() {
        let d = Dir::new();
        let file = d.password(0o644);
        let err = check_private(&d.0, &file, &me(&file))
            .unwrap_err()
            .to_string();
        assert!(err.contains("chmod 600"), "{err}");
    }

    #[test]
    fn a_password_file_of_another_user_is_refused() {
        let d = Dir::new();
        let file = d.password(0o600);
        let someone_else = vec![std::fs::metadata(&file).unwrap().uid().wrapping_add(1)];
        let err = check_private(&d.0, &file, &someone_else)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not written by Inquest"), "{err}");
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let d = Dir::new();
        std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o777)).unwrap();
        let file = d.0.join(PASSWORD_FILE);
        let err = check_private(&d.0, &file, &me(&d.0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("chmod go-w"), "{err}");
    }

    /// The whole start refuses a planted, world-readable password file
    /// before it runs anything.
    #[test]
    fn a_cluster_does_not_start_on_a_readable_password_file() {
        let d = Dir::new();
        d.password(0o644);
        match EmbeddedPostgres::start(&EmbeddedOptions::new(&d.0)) {
            Err(EmbeddedError::NotPrivate(why)) => assert!(why.contains("chmod 600"), "{why}"),
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("started on a world-readable password file"),
        }
    }

    #[test]
    fn a_link_in_place_of_the_password_file_is_refused() {
        let d = Dir::new();
        let target = d.0.join("elsewhere");
        std::fs::write(&target, "x").unwrap();
        let file = d.0.join(PASSWORD_FILE);
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert!(check_private(&d.0, &file, &me(&d.0)).is_err());
    }
}
