//! Owner SID and DACL. The daemon's account (its token's user and default owner), SYSTEM and
//! the Administrators group may write a trusted path; any other account an allow entry
//! grants a write right to (write data, append, delete a child, delete, change the DACL or
//! the owner, generic write or all) makes the path untrusted. Deny entries are not weighed
//! (a path is refused even if a deny entry would cancel the grant): the safe side.

use std::ffi::OsStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, LocalFree};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW,
    ConvertStringSidToSidW, GetNamedSecurityInfoW, GetSecurityInfo, SDDL_REVISION_1,
    SE_FILE_OBJECT, SetNamedSecurityInfoW,
};
use windows_sys::Win32::Security::{
    ACCESS_ALLOWED_ACE, ACE_HEADER, ACL, CheckTokenMembership, DACL_SECURITY_INFORMATION, GetAce,
    GetLengthSid, GetSecurityDescriptorDacl, GetTokenInformation, INHERIT_ONLY_ACE,
    LookupAccountSidW, OWNER_SECURITY_INFORMATION, PROTECTED_DACL_SECURITY_INFORMATION,
    PSECURITY_DESCRIPTOR, PSID, SID_NAME_USE, TOKEN_INFORMATION_CLASS, TOKEN_OWNER, TOKEN_QUERY,
    TOKEN_USER, TokenOwner, TokenUser,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

use super::{Distrust, Owners};
use crate::wide_text::{from_wide_ptr, wide};

/// `FILE_FLAG_OPEN_REPARSE_POINT`: open a symbolic link (or junction) itself.
const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
const SYSTEM: &str = "S-1-5-18";
const ADMINISTRATORS: &str = "S-1-5-32-544";
/// CREATOR OWNER and OWNER RIGHTS: placeholders for the owner, who is checked on its own.
const OWNER_PLACEHOLDERS: &[&str] = &["S-1-3-0", "S-1-3-4"];
/// Allow entry types laid out as ACCESS_ALLOWED_ACE (plain, and callback).
const ALLOWED_TYPES: &[u8] = &[0, 9];
/// Deny entry types (plain, object, callback, callback object).
const DENIED_TYPES: &[u8] = &[1, 6, 10, 12];
/// FILE_WRITE_DATA/ADD_FILE, FILE_APPEND_DATA/ADD_SUBDIRECTORY, FILE_DELETE_CHILD, DELETE,
/// WRITE_DAC, WRITE_OWNER, GENERIC_ALL, GENERIC_WRITE.
const WRITE_RIGHTS: u32 =
    0x2 | 0x4 | 0x40 | 0x1_0000 | 0x4_0000 | 0x8_0000 | 0x1000_0000 | 0x4000_0000;

/// The SIDs the checks compare with, as bytes.
struct Accounts {
    user: Vec<u8>,
    default_owner: Vec<u8>,
    system: Vec<u8>,
    administrators: Vec<u8>,
    placeholders: Vec<Vec<u8>>,
}

fn accounts() -> Result<&'static Accounts, Distrust> {
    static ACCOUNTS: OnceLock<io::Result<Accounts>> = OnceLock::new();
    ACCOUNTS
        .get_or_init(read_accounts)
        .as_ref()
        .map_err(|error| {
            Distrust::Unreadable(io::Error::other(format!(
                "cannot read the daemon's own account: {error}"
            )))
        })
}

fn read_accounts() -> io::Result<Accounts> {
    let placeholders = OWNER_PLACEHOLDERS
        .iter()
        .map(|sid| well_known(sid))
        .collect::<io::Result<_>>()?;
    Ok(Accounts {
        user: token_sid(TokenUser)?,
        default_owner: token_sid(TokenOwner)?,
        system: well_known(SYSTEM)?,
        administrators: well_known(ADMINISTRATORS)?,
        placeholders,
    })
}

/// The user (TokenUser) or default owner (TokenOwner) SID of this process's token.
fn token_sid(class: TOKEN_INFORMATION_CLASS) -> io::Result<Vec<u8>> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo-handle of this process; `token` is closed below.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let mut needed = 0u32;
    // SAFETY: a size query (no buffer), then a query into a buffer of that size, u64-aligned.
    let result = unsafe {
        GetTokenInformation(token, class, std::ptr::null_mut(), 0, &mut needed);
        let mut buffer = vec![0u64; (needed as usize).div_ceil(8)];
        let read = GetTokenInformation(
            token,
            class,
            buffer.as_mut_ptr().cast(),
            needed,
            &mut needed,
        );
        match read {
            0 => Err(io::Error::last_os_error()),
            // TOKEN_USER starts with the SID's pointer, as does TOKEN_OWNER.
            _ if class == TokenUser => {
                Ok(sid_bytes((*buffer.as_ptr().cast::<TOKEN_USER>()).User.Sid))
            }
            _ => Ok(sid_bytes((*buffer.as_ptr().cast::<TOKEN_OWNER>()).Owner)),
        }
    };
    // SAFETY: the token handle opened above.
    unsafe { CloseHandle(token) };
    result
}

fn well_known(text: &str) -> io::Result<Vec<u8>> {
    let mut sid: PSID = std::ptr::null_mut();
    // SAFETY: a NUL-terminated string; the SID is freed with LocalFree after copying.
    unsafe {
        if ConvertStringSidToSidW(wide(OsStr::new(text)).as_ptr(), &mut sid) == 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes = sid_bytes(sid);
        LocalFree(sid);
        Ok(bytes)
    }
}

/// The bytes of a valid SID.
///
/// # Safety
/// `sid` must point to a valid SID.
unsafe fn sid_bytes(sid: PSID) -> Vec<u8> {
    // SAFETY: the caller's promise; GetLengthSid gives the SID's length in bytes.
    unsafe { std::slice::from_raw_parts(sid.cast::<u8>(), GetLengthSid(sid) as usize).to_vec() }
}

/// "S-1-5-21-…" for a SID given as bytes.
fn sid_text(sid: &[u8]) -> String {
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: `sid` holds a valid SID; the string is freed with LocalFree after copying.
    unsafe {
        if ConvertSidToStringSidW(sid.as_ptr() as PSID, &mut text) == 0 {
            return "an unknown account".to_owned();
        }
        let copied = from_wide_ptr(text).to_string_lossy().into_owned();
        LocalFree(text.cast());
        copied
    }
}

/// "DOMAIN\name (S-1-…)", or the SID alone when it names no account.
fn describe(sid: &[u8]) -> String {
    let text = sid_text(sid);
    let mut name = [0u16; 256];
    let mut domain = [0u16; 256];
    let (mut name_len, mut domain_len) = (name.len() as u32, domain.len() as u32);
    let mut kind: SID_NAME_USE = 0;
    // SAFETY: buffers with their lengths in characters; `sid` is a valid SID.
    let found = unsafe {
        LookupAccountSidW(
            std::ptr::null(),
            sid.as_ptr() as PSID,
            name.as_mut_ptr(),
            &mut name_len,
            domain.as_mut_ptr(),
            &mut domain_len,
            &mut kind,
        )
    };
    if found == 0 {
        return text;
    }
    let name = String::from_utf16_lossy(&name[..name_len as usize]);
    let domain = String::from_utf16_lossy(&domain[..domain_len as usize]);
    match domain.is_empty() {
        true => format!("{name} ({text})"),
        false => format!("{domain}\\{name} ({text})"),
    }
}

/// A security descriptor read from a file, with its owner and DACL; freed when dropped.
struct Security {
    descriptor: PSECURITY_DESCRIPTOR,
    owner: PSID,
    dacl: *mut ACL,
}

impl Drop for Security {
    fn drop(&mut self) {
        // SAFETY: allocated by Get(Named)SecurityInfo, freed once.
        unsafe { LocalFree(self.descriptor) };
    }
}

fn security_of(path: &Path, file: Option<&File>) -> io::Result<Security> {
    let mut security = Security {
        descriptor: std::ptr::null_mut(),
        owner: std::ptr::null_mut(),
        dacl: std::ptr::null_mut(),
    };
    let what = OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION;
    // SAFETY: out-pointers into `security`; the owner and DACL point into the descriptor,
    // which `security` frees when dropped.
    let status = unsafe {
        match file {
            Some(file) => GetSecurityInfo(
                file.as_raw_handle() as HANDLE,
                SE_FILE_OBJECT,
                what,
                &mut security.owner,
                std::ptr::null_mut(),
                &mut security.dacl,
                std::ptr::null_mut(),
                &mut security.descriptor,
            ),
            None => GetNamedSecurityInfoW(
                wide(std::path::absolute(path)?.as_os_str()).as_ptr(),
                SE_FILE_OBJECT,
                what,
                &mut security.owner,
                std::ptr::null_mut(),
                &mut security.dacl,
                std::ptr::null_mut(),
                &mut security.descriptor,
            ),
        }
    };
    match status {
        0 => Ok(security),
        code => Err(io::Error::from_raw_os_error(code as i32)),
    }
}

pub(super) fn check(
    path: &Path,
    metadata: &Metadata,
    file: Option<&File>,
    owners: Owners,
) -> Result<(), Distrust> {
    let accounts = accounts()?;
    let security = security_of(path, file).map_err(Distrust::Unreadable)?;
    if security.owner.is_null() {
        return Err(Distrust::Unreadable(io::Error::other("it has no owner")));
    }
    // SAFETY: a valid SID inside the descriptor `security` holds.
    let owner = unsafe { sid_bytes(security.owner) };
    check_owner(path, &owner, accounts, owners)?;
    check_writers(path, &security, accounts, metadata.is_dir())
}

fn check_owner(
    path: &Path,
    owner: &[u8],
    accounts: &Accounts,
    owners: Owners,
) -> Result<(), Distrust> {
    let mut allowed = vec![&accounts.user, &accounts.default_owner];
    if owners == Owners::DaemonOrRoot {
        allowed.extend([&accounts.system, &accounts.administrators]);
    }
    if allowed.iter().any(|sid| sid.as_slice() == owner) {
        return Ok(());
    }
    let (expected, new_owner) = match owners {
        Owners::DaemonOnly => (
            format!("the daemon's account {}", describe(&accounts.user)),
            sid_text(&accounts.user),
        ),
        Owners::DaemonOrRoot => (
            format!(
                "the daemon's account {}, SYSTEM or the Administrators group",
                describe(&accounts.user)
            ),
            ADMINISTRATORS.to_owned(),
        ),
    };
    Err(Distrust::Owner {
        owner: describe(owner),
        expected,
        fix: format!("icacls \"{}\" /setowner *{new_owner}", path.display()),
    })
}

fn check_writers(
    path: &Path,
    security: &Security,
    accounts: &Accounts,
    is_dir: bool,
) -> Result<(), Distrust> {
    if security.dacl.is_null() {
        return Err(Distrust::Writable {
            who: "everyone".to_owned(),
            how: "it has no access control list at all".to_owned(),
            fix: private_acl_fix(path, accounts, None, is_dir),
        });
    }
    let mut trusted = vec![
        &accounts.user,
        &accounts.default_owner,
        &accounts.system,
        &accounts.administrators,
    ];
    trusted.extend(accounts.placeholders.iter());
    // SAFETY: a valid ACL inside the descriptor `security` holds.
    let count = unsafe { (*security.dacl).AceCount };
    for index in 0..u32::from(count) {
        let mut entry: *mut core::ffi::c_void = std::ptr::null_mut();
        // SAFETY: index < AceCount; GetAce points into the ACL.
        if unsafe { GetAce(security.dacl, index, &mut entry) } == 0 {
            return Err(Distrust::Unreadable(io::Error::last_os_error()));
        }
        // SAFETY: every entry starts with an ACE_HEADER.
        let header = unsafe { &*entry.cast::<ACE_HEADER>() };
        if u32::from(header.AceFlags) & INHERIT_ONLY_ACE != 0
            || DENIED_TYPES.contains(&header.AceType)
        {
            continue;
        }
        if !ALLOWED_TYPES.contains(&header.AceType) {
            return Err(Distrust::Writable {
                who: format!(
                    "the accounts of an access control entry of type {}",
                    header.AceType
                ),
                how: "forewarn cannot judge that kind of entry".to_owned(),
                fix: private_acl_fix(path, accounts, None, is_dir),
            });
        }
        // SAFETY: allowed and callback-allowed entries are laid out as ACCESS_ALLOWED_ACE,
        // the SID starting at SidStart.
        let (mask, sid) = unsafe {
            let allowed = &*entry.cast::<ACCESS_ALLOWED_ACE>();
            (
                allowed.Mask,
                sid_bytes((&raw const allowed.SidStart) as PSID),
            )
        };
        if mask & WRITE_RIGHTS == 0 || trusted.iter().any(|known| known.as_slice() == sid) {
            continue;
        }
        return Err(Distrust::Writable {
            who: describe(&sid),
            how: "its access control list allows it".to_owned(),
            fix: private_acl_fix(path, accounts, Some(&sid), is_dir),
        });
    }
    Ok(())
}

/// `icacls PATH /inheritance:r [/remove:g *SID] /grant:r *SYSTEM:F *Administrators:F
/// [*daemon:F]` (with `(OI)(CI)` for a directory).
fn private_acl_fix(
    path: &Path,
    accounts: &Accounts,
    remove: Option<&[u8]>,
    is_dir: bool,
) -> String {
    let inherit = if is_dir { "(OI)(CI)" } else { "" };
    let mut fix = format!("icacls \"{}\" /inheritance:r", path.display());
    if let Some(sid) = remove {
        fix.push_str(&format!(" /remove:g *{}", sid_text(sid)));
    }
    fix.push_str(&format!(
        " /grant:r *{SYSTEM}:{inherit}F *{ADMINISTRATORS}:{inherit}F"
    ));
    if accounts.user != accounts.system {
        fix.push_str(&format!(" *{}:{inherit}F", sid_text(&accounts.user)));
    }
    fix
}

pub(super) fn kind_of(metadata: &Metadata) -> &'static str {
    if metadata.file_type().is_symlink() {
        "symbolic link"
    } else if metadata.is_dir() {
        "directory"
    } else {
        "file"
    }
}

pub(super) fn create_private_dir(dir: &Path) -> io::Result<()> {
    let dir = std::path::absolute(dir)?;
    let first_created = dir
        .ancestors()
        .take_while(|ancestor| !ancestor.exists())
        .last()
        .map(Path::to_path_buf);
    fs::create_dir_all(&dir)?;
    match first_created {
        Some(top) => protect(&top),
        None => Ok(()),
    }
}

/// Gives `dir` a protected DACL (nothing inherited from its parent): full control for
/// SYSTEM and the Administrators, and for this process's account when it is neither (a
/// service account creating its own state directory), inherited by what it will hold. An
/// administrator's own account is not named: the group covers it, and the service, which
/// runs as another account, would not trust an entry for a user it cannot vouch for.
fn protect(dir: &Path) -> io::Result<()> {
    let accounts = accounts().map_err(|_| io::Error::other("cannot read the daemon's account"))?;
    let mut sddl = String::from("D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)");
    if accounts.user != accounts.system && !is_administrator(accounts) {
        sddl.push_str(&format!("(A;OICI;FA;;;{})", sid_text(&accounts.user)));
    }
    set_dacl(dir, &sddl)
}

/// Whether this process runs with the Administrators group enabled (elevated).
fn is_administrator(accounts: &Accounts) -> bool {
    let mut member = 0;
    // SAFETY: no token (this thread's or process's), a valid SID, an out-flag.
    let checked = unsafe {
        CheckTokenMembership(
            std::ptr::null_mut(),
            accounts.administrators.as_ptr() as PSID,
            &mut member,
        )
    };
    checked != 0 && member != 0
}

/// Replaces `path`'s DACL with the one the SDDL text describes (protected when it says
/// `D:P`).
fn set_dacl(path: &Path, sddl: &str) -> io::Result<()> {
    let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: a NUL-terminated SDDL string; the descriptor is freed with LocalFree below,
    // after the DACL pointing into it was used.
    unsafe {
        let made = ConvertStringSecurityDescriptorToSecurityDescriptorW(
            wide(OsStr::new(sddl)).as_ptr(),
            SDDL_REVISION_1,
            &mut descriptor,
            std::ptr::null_mut(),
        );
        if made == 0 {
            return Err(io::Error::last_os_error());
        }
        let (mut present, mut defaulted) = (0, 0);
        let mut dacl: *mut ACL = std::ptr::null_mut();
        GetSecurityDescriptorDacl(descriptor, &mut present, &mut dacl, &mut defaulted);
        let status = SetNamedSecurityInfoW(
            wide(std::path::absolute(path)?.as_os_str()).as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            dacl,
            std::ptr::null(),
        );
        LocalFree(descriptor);
        match status {
            0 => Ok(()),
            code => Err(io::Error::from_raw_os_error(code as i32)),
        }
    }
}

pub(super) fn read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(OPEN_REPARSE_POINT);
    options
}

pub(super) fn no_follow_write_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.custom_flags(OPEN_REPARSE_POINT);
    options
}

pub(super) fn create_shared_dir(dir: &Path) -> io::Result<()> {
    // Inherits the parent's DACL: the plugin directory's, which the administrators set.
    fs::create_dir_all(dir)
}

pub(super) fn create_new_shared_options() -> OpenOptions {
    no_follow_write_options()
}

pub(super) fn write_all_at(file: &File, mut bytes: &[u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !bytes.is_empty() {
        match file.seek_write(bytes, offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(written) => {
                bytes = &bytes[written..];
                offset += written as u64;
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// `FILE_FLAG_BACKUP_SEMANTICS`: what opening a directory needs.
const BACKUP_SEMANTICS: u32 = 0x0200_0000;
/// `FILE_ADD_FILE` (a directory's write access) and `FILE_READ_ATTRIBUTES`.
const ADD_FILE_AND_READ_ATTRIBUTES: u32 = 0x0002 | 0x0080;
/// `FILE_SHARE_READ | FILE_SHARE_DELETE`: everyone may read (the daemon's watcher too),
/// nobody else may open it for writing.
const SHARE_ALL_BUT_WRITE: u32 = 0x1 | 0x4;
/// `ERROR_SHARING_VIOLATION`.
const SHARING_VIOLATION: i32 = 32;

pub(super) fn try_lock_dir(dir: &Path) -> io::Result<Option<File>> {
    let opened = OpenOptions::new()
        .access_mode(ADD_FILE_AND_READ_ATTRIBUTES)
        .share_mode(SHARE_ALL_BUT_WRITE)
        .custom_flags(BACKUP_SEMANTICS)
        .open(dir);
    match opened {
        Ok(file) => Ok(Some(file)),
        Err(error) if error.raw_os_error() == Some(SHARING_VIOLATION) => Ok(None),
        Err(error) => Err(error),
    }
}

pub(super) fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

pub(super) fn make_executable(_path: &Path) -> io::Result<()> {
    Ok(())
}

pub(super) fn is_device_error(error: &io::Error) -> bool {
    use windows_sys::Win32::Foundation::{ERROR_CRC, ERROR_IO_DEVICE};
    matches!(error.raw_os_error(), Some(code) if code == ERROR_IO_DEVICE as i32 || code == ERROR_CRC as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_private_dir_is_trusted() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("state").join("cache");
        create_private_dir(&dir).unwrap();
        let metadata = fs::metadata(&dir).unwrap();
        for owners in [Owners::DaemonOnly, Owners::DaemonOrRoot] {
            if let Err(distrust) = check(&dir, &metadata, None, owners) {
                panic!("{distrust:?}");
            }
        }
    }

    #[test]
    fn a_dir_everyone_may_write_is_refused_with_an_icacls_fix() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("plugins.d");
        create_private_dir(&dir).unwrap();
        // SYSTEM, the Administrators and Everyone (WD) with full control.
        set_dacl(&dir, "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;WD)").unwrap();
        let metadata = fs::metadata(&dir).unwrap();
        match check(&dir, &metadata, None, Owners::DaemonOrRoot) {
            Err(Distrust::Writable { who, fix, .. }) => {
                assert!(who.contains("S-1-1-0"), "{who}");
                assert!(fix.starts_with("icacls \""), "{fix}");
                assert!(fix.contains("/remove:g *S-1-1-0"), "{fix}");
            }
            other => panic!("a directory Everyone may write was not refused: {other:?}"),
        }
    }

    #[test]
    fn read_only_entries_for_others_are_fine() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("plugins.d");
        create_private_dir(&dir).unwrap();
        // Everyone may read and list (FR), not write.
        set_dacl(&dir, "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FR;;;WD)").unwrap();
        let metadata = fs::metadata(&dir).unwrap();
        if let Err(distrust) = check(&dir, &metadata, None, Owners::DaemonOrRoot) {
            panic!("{distrust:?}");
        }
    }
}
