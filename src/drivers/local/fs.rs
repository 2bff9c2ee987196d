//! Filesystem plumbing for the local driver, confined to a pool directory.
//!
//! Everything below a pool's root is reached from a directory file descriptor, one path
//! segment at a time, with `O_NOFOLLOW` (`openat`, `mkdirat`, `unlinkat`, `renameat`,
//! `fstatat(AT_SYMLINK_NOFOLLOW)`). A symbolic link found where a directory or file is
//! expected is refused; inside a copied tree it is copied as a link (its target is never
//! resolved); a removed tree loses the link, never what it points to. Only the pool root itself,
//! which the administrator configured, is opened through an ordinary path.
//!
//! The functions here are blocking: the driver calls them from `spawn_blocking`.

use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::{
    self as rfs, AtFlags, Dir, FallocateFlags, FileType, Mode, OFlags, SeekFrom, Stat,
};
use rustix::io::Errno;

/// How deep a copied or removed tree may go. Each level holds two file descriptors at most.
pub const MAX_DEPTH: usize = 256;

/// The chunk size of copies and zero-filling done with plain reads and writes.
const CHUNK: usize = 1 << 20;

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// An `io::Error` that keeps the kind of `e` and says which entry it is about.
fn at(name: impl std::fmt::Display, e: impl Into<io::Error>) -> io::Error {
    let e = e.into();
    io::Error::new(e.kind(), format!("{name}: {e}"))
}

fn shown(name: &CStr) -> String {
    name.to_string_lossy().into_owned()
}

/// The error for an `openat(O_NOFOLLOW)` that failed with `ELOOP` or `ENOTDIR`: says whether
/// the entry is a symbolic link (refused) or the wrong kind of file.
fn refusal(parent: BorrowedFd<'_>, name: &CStr, e: Errno, expected: &str) -> io::Error {
    if e == Errno::LOOP || e == Errno::NOTDIR {
        match rfs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if file_type(&st) == FileType::Symlink => {
                return io::Error::other(format!(
                    "{} is a symbolic link; refusing to follow it",
                    shown(name)
                ));
            }
            Ok(_) => {
                return io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not {expected}", shown(name)),
                );
            }
            Err(_) => {}
        }
    }
    at(shown(name), e)
}

fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

fn c(name: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} contains NUL"),
        )
    })
}

/// Opens a pool's root directory. The configured path may contain symbolic links (it is the
/// administrator's); nothing below it is reached by path.
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    rfs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| at(path.display(), e))
}

/// Opens directory `name` in `parent` without following a symbolic link. `Ok(None)` when it
/// does not exist.
pub fn open_dir(parent: BorrowedFd<'_>, name: &str) -> io::Result<Option<OwnedFd>> {
    let name = c(name)?;
    open_dir_c(parent, &name)
}

fn open_dir_c(parent: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<OwnedFd>> {
    match rfs::openat(parent, name, dir_flags(), Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(refusal(parent, name, e, "a directory")),
    }
}

/// Opens directory `name` in `parent`, creating it (mode 0755) when missing. Returns the
/// directory and whether it was created (the caller then fsyncs `parent`).
pub fn ensure_dir(parent: BorrowedFd<'_>, name: &str) -> io::Result<(OwnedFd, bool)> {
    let cname = c(name)?;
    let created = match rfs::mkdirat(parent, &*cname, Mode::from_raw_mode(0o755)) {
        Ok(()) => true,
        Err(Errno::EXIST) => false,
        Err(e) => return Err(at(name, e)),
    };
    match open_dir_c(parent, &cname)? {
        Some(fd) => Ok((fd, created)),
        None => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{name} disappeared while being opened"),
        )),
    }
}

/// Creates directory `name` in `parent` with exactly `mode` (not masked by the umask) and
/// fsyncs it. Fails with `AlreadyExists` when anything is there, a symbolic link included.
pub fn make_dir(parent: BorrowedFd<'_>, name: &str, mode: u32) -> io::Result<()> {
    let cname = c(name)?;
    rfs::mkdirat(parent, &*cname, Mode::from_raw_mode(0o700)).map_err(|e| at(name, e))?;
    let result = (|| {
        let fd = open_dir_c(parent, &cname)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{name} disappeared"))
        })?;
        rfs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| at(name, e))?;
        rfs::fsync(&fd).map_err(|e| at(name, e))
    })();
    if result.is_err() {
        let _ = remove_tree(parent, name);
    }
    result
}

/// Creates image file `name` in `parent` of exactly `size` bytes: sparse, or with every block
/// allocated when `thick` (`fallocate`, or zeros written where the filesystem cannot
/// fallocate). Fails with `AlreadyExists` when anything is there. A partly made image is
/// removed.
pub fn create_image(parent: BorrowedFd<'_>, name: &str, size: u64, thick: bool) -> io::Result<()> {
    let cname = c(name)?;
    let fd = rfs::openat(
        parent,
        &*cname,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| at(name, e))?;
    let file = File::from(fd);
    let result = if thick {
        allocate(&file, 0, size)
    } else {
        file.set_len(size)
    }
    .and_then(|()| file.sync_all())
    .map_err(|e| at(name, e));
    if result.is_err() {
        drop(file);
        let _ = rfs::unlinkat(parent, &*cname, AtFlags::empty());
    }
    result
}

/// Grows image file `name` in `parent` to `size` bytes (never shrinks it), allocating the new
/// part when `thick`. The image must be a regular file; a symbolic link is refused.
pub fn grow_image(parent: BorrowedFd<'_>, name: &str, size: u64, thick: bool) -> io::Result<()> {
    let cname = c(name)?;
    let fd = rfs::openat(
        parent,
        &*cname,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| refusal(parent, &cname, e, "an image file"))?;
    let file = File::from(fd);
    let current = rfs::fstat(&file).map_err(|e| at(name, e))?;
    if file_type(&current) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} is not a regular file"),
        ));
    }
    let current = u64::try_from(current.st_size).unwrap_or(0);
    if size > current {
        if thick {
            allocate(&file, current, size - current)
        } else {
            file.set_len(size)
        }
        .map_err(|e| at(name, e))?;
    }
    file.sync_all().map_err(|e| at(name, e))
}

/// Allocates every block of image file `name` in `parent` (fills its holes), keeping its
/// length. A symbolic link is refused.
pub fn allocate_image(parent: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let cname = c(name)?;
    let fd = rfs::openat(
        parent,
        &*cname,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| refusal(parent, &cname, e, "an image file"))?;
    let file = File::from(fd);
    let st = rfs::fstat(&file).map_err(|e| at(name, e))?;
    if file_type(&st) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} is not a regular file"),
        ));
    }
    let len = u64::try_from(st.st_size).unwrap_or(0);
    match rfs::fallocate(&file, FallocateFlags::empty(), 0, len) {
        Ok(()) => {}
        Err(_) if len == 0 => {}
        // Zeros would overwrite the data: without fallocate the holes stay.
        Err(Errno::OPNOTSUPP | Errno::NOSYS) => {}
        Err(e) => return Err(at(name, e)),
    }
    file.sync_all().map_err(|e| at(name, e))
}

/// Allocates `len` bytes from `offset`, extending the file: `fallocate`, or zeros written where
/// the filesystem does not support it.
pub fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    match rfs::fallocate(file, FallocateFlags::empty(), offset, len) {
        Ok(()) => Ok(()),
        Err(Errno::OPNOTSUPP | Errno::NOSYS) => write_zeros(file, offset, len),
        Err(e) => Err(e.into()),
    }
}

/// Writes `len` zero bytes from `offset`.
pub fn write_zeros(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; CHUNK];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], offset + done)?;
        done += n as u64;
    }
    Ok(())
}

/// Removes `name` from `parent`: a directory with everything in it, or a file or symbolic link
/// (the link only, never its target). Returns whether anything was there. Never leaves
/// `parent`: subdirectories are opened with `O_NOFOLLOW`. Trees of any depth are removed:
/// a subtree deeper than [`MAX_DEPTH`] is first moved up into the directory being removed.
pub fn remove_tree(parent: BorrowedFd<'_>, name: &str) -> io::Result<bool> {
    let cname = c(name)?;
    remove_entry(parent, &cname, 0, None)
}

/// How many times a directory being removed is listed again for entries moved into it.
const MAX_PASSES: usize = 4096;

fn remove_entry(
    parent: BorrowedFd<'_>,
    name: &CStr,
    depth: usize,
    sink: Option<BorrowedFd<'_>>,
) -> io::Result<bool> {
    let st = match rfs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(at(shown(name), e)),
    };
    if file_type(&st) != FileType::Directory {
        return match rfs::unlinkat(parent, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(true),
            Err(e) => Err(at(shown(name), e)),
        };
    }
    if depth >= MAX_DEPTH {
        let Some(sink) = sink else {
            return Err(io::Error::other(format!(
                "{}: nested deeper than {MAX_DEPTH} levels",
                shown(name)
            )));
        };
        move_up(parent, name, sink)?;
        return Ok(true);
    }
    let Some(dir) = open_dir_c(parent, name)? else {
        return Ok(true);
    };
    // It is going away: make sure its entries can be removed whatever its mode.
    let _ = rfs::fchmod(&dir, Mode::from_raw_mode(0o700));
    let sink = sink.unwrap_or(dir.as_fd());
    for _ in 0..MAX_PASSES {
        let mut children = Vec::new();
        for entry in Dir::read_from(&dir).map_err(|e| at(shown(name), e))? {
            let entry = entry.map_err(|e| at(shown(name), e))?;
            let child = entry.file_name();
            if child != c"." && child != c".." {
                children.push(child.to_owned());
            }
        }
        if children.is_empty() {
            break;
        }
        for child in &children {
            remove_entry(dir.as_fd(), child, depth + 1, Some(sink))
                .map_err(|e| io::Error::new(e.kind(), format!("{}/{e}", shown(name))))?;
        }
    }
    drop(dir);
    match rfs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(true),
        Err(e) => Err(at(shown(name), e)),
    }
}

/// Moves directory `name` of `parent` into `sink` under a fresh name (same filesystem: a
/// rename, no copy).
fn move_up(parent: BorrowedFd<'_>, name: &CStr, sink: BorrowedFd<'_>) -> io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let target = c(&format!(".storch-deep-{n}"))?;
        match rfs::renameat_with(parent, name, sink, &*target, rfs::RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(at(shown(name), e)),
        }
    }
}

/// How a copy was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopyStats {
    /// Regular files shared with the source through `FICLONE`.
    pub reflinked: u64,
    /// Regular files copied byte by byte (holes kept).
    pub copied: u64,
}

/// Copies `src_name` in `src_dir` to `dst_name` in `dst_dir`, which must not exist: a regular
/// file (reflinked where the filesystem can, else copied with its holes kept) or a directory
/// tree. The source itself must not be a symbolic link; links inside a tree are copied as
/// links. Modes are copied, owners where permitted; special files (devices, FIFOs, sockets)
/// are skipped. The copy is durable when this returns. On failure nothing this call created is
/// left; anything already at `dst_name` is left alone (the error is then `AlreadyExists`).
pub fn copy(
    src_dir: BorrowedFd<'_>,
    src_name: &str,
    dst_dir: BorrowedFd<'_>,
    dst_name: &str,
) -> io::Result<CopyStats> {
    let src = c(src_name)?;
    let dst = c(dst_name)?;
    let st = rfs::statat(src_dir, &*src, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| at(src_name, e))?;
    let mut stats = CopyStats::default();
    let result = match file_type(&st) {
        FileType::Symlink => {
            return Err(io::Error::other(format!(
                "{src_name} is a symbolic link; refusing to follow it"
            )));
        }
        FileType::RegularFile => {
            let src_file = open_regular(src_dir, &src, &st)?;
            let dst_file = create_file(dst_dir, &dst)?;
            fill(&src_file, &dst_file, &st, &mut stats)
                .and_then(|()| dst_file.sync_all())
                .map_err(|e| at(src_name, e))
        }
        FileType::Directory => {
            let src_fd = open_dir_c(src_dir, &src)?
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, src_name.to_string()))?;
            rfs::mkdirat(dst_dir, &*dst, Mode::from_raw_mode(0o700))
                .map_err(|e| at(dst_name, e))?;
            copy_dir(&src_fd, dst_dir, &dst, &st, 0, &mut stats).and_then(|()| {
                // One filesystem sync instead of one fsync per copied file.
                rfs::syncfs(dst_dir).map_err(|e| at(dst_name, e))
            })
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{src_name} is neither a directory nor a regular file"),
            ));
        }
    };
    if let Err(e) = result {
        // The destination was created by this call: take it away again.
        let _ = remove_tree(dst_dir, dst_name);
        return Err(e);
    }
    Ok(stats)
}

/// Copies the contents of the open directory `src` into the new, empty directory `dst` in
/// `dst_parent`, then gives `dst` the owner and mode of `st`.
fn copy_dir(
    src: &OwnedFd,
    dst_parent: BorrowedFd<'_>,
    dst: &CStr,
    st: &Stat,
    depth: usize,
    stats: &mut CopyStats,
) -> io::Result<()> {
    if depth >= MAX_DEPTH {
        return Err(io::Error::other(format!(
            "directories nested deeper than {MAX_DEPTH} levels"
        )));
    }
    let dst_fd = open_dir_c(dst_parent, dst)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, shown(dst)))?;
    // The names first, so that only two descriptors stay open per level.
    let mut names = Vec::new();
    for entry in Dir::read_from(src)? {
        let entry = entry?;
        let name = entry.file_name();
        if name != c"." && name != c".." {
            names.push(name.to_owned());
        }
    }
    for name in &names {
        let within = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", shown(name)));
        let child =
            rfs::statat(src, &**name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| within(e.into()))?;
        match file_type(&child) {
            FileType::Directory => {
                let Some(child_fd) = open_dir_c(src.as_fd(), name)? else {
                    continue; // removed meanwhile
                };
                rfs::mkdirat(&dst_fd, &**name, Mode::from_raw_mode(0o700))
                    .map_err(|e| within(e.into()))?;
                copy_dir(&child_fd, dst_fd.as_fd(), name, &child, depth + 1, stats)
                    .map_err(within)?;
            }
            FileType::RegularFile => {
                let src_file = open_regular(src.as_fd(), name, &child)?;
                let dst_file = create_file(dst_fd.as_fd(), name)?;
                fill(&src_file, &dst_file, &child, stats).map_err(within)?;
            }
            FileType::Symlink => {
                let target =
                    rfs::readlinkat(src, &**name, Vec::new()).map_err(|e| within(e.into()))?;
                rfs::symlinkat(&*target, &dst_fd, &**name).map_err(|e| within(e.into()))?;
                let _ = rfs::chownat(
                    &dst_fd,
                    &**name,
                    Some(rfs::Uid::from_raw(child.st_uid)),
                    Some(rfs::Gid::from_raw(child.st_gid)),
                    AtFlags::SYMLINK_NOFOLLOW,
                );
            }
            _ => {
                tracing::warn!(
                    entry = %shown(name),
                    "local driver: not copying a device, FIFO or socket"
                );
            }
        }
    }
    set_owner_and_mode(&dst_fd, st);
    Ok(())
}

fn set_owner_and_mode(fd: impl AsFd, st: &Stat) {
    // Ownership only sticks when running as root; the mode after it (chown clears setuid).
    let _ = rfs::fchown(
        &fd,
        Some(rfs::Uid::from_raw(st.st_uid)),
        Some(rfs::Gid::from_raw(st.st_gid)),
    );
    let _ = rfs::fchmod(&fd, Mode::from_raw_mode(st.st_mode & 0o7777));
}

/// Opens regular file `name` for reading, checking it is still the file `st` describes.
fn open_regular(parent: BorrowedFd<'_>, name: &CStr, st: &Stat) -> io::Result<File> {
    let fd = rfs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| refusal(parent, name, e, "a regular file"))?;
    let file = File::from(fd);
    let opened = rfs::fstat(&file).map_err(|e| at(shown(name), e))?;
    if file_type(&opened) != FileType::RegularFile
        || opened.st_ino != st.st_ino
        || opened.st_dev != st.st_dev
    {
        return Err(io::Error::other(format!(
            "{} changed while being copied",
            shown(name)
        )));
    }
    Ok(file)
}

/// Creates the new, empty file `name` (mode 0600 until filled).
fn create_file(parent: BorrowedFd<'_>, name: &CStr) -> io::Result<File> {
    let fd = rfs::openat(
        parent,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| at(shown(name), e))?;
    Ok(File::from(fd))
}

/// Fills the new file `dst` with `src`'s data: a reflink where the filesystem can, else a copy
/// of its data ranges; then `st`'s owner and mode.
fn fill(src: &File, dst: &File, st: &Stat, stats: &mut CopyStats) -> io::Result<()> {
    if rfs::ioctl_ficlone(dst, src).is_ok() {
        stats.reflinked += 1;
    } else {
        // Not supported here (ext4, tmpfs, across filesystems, …): copy the data ranges.
        let len = rfs::fstat(src).map(|s| u64::try_from(s.st_size).unwrap_or(0))?;
        sparse_copy(src, dst, len)?;
        stats.copied += 1;
    }
    set_owner_and_mode(dst, st);
    Ok(())
}

/// Copies the first `len` bytes of `src` into the empty `dst`, keeping holes where the
/// filesystem reports them (`SEEK_DATA` / `SEEK_HOLE`), and sets `dst`'s length to `len`.
pub fn sparse_copy(src: &File, dst: &File, len: u64) -> io::Result<()> {
    let mut offset = 0u64;
    while offset < len {
        let data = match rfs::seek(src, SeekFrom::Data(offset)) {
            Ok(d) => d,
            // No data after `offset`: the rest is a hole.
            Err(Errno::NXIO) => break,
            // Holes unknown to this filesystem: everything is data.
            Err(Errno::INVAL | Errno::OPNOTSUPP) => offset,
            Err(e) => return Err(e.into()),
        };
        if data >= len {
            break;
        }
        let hole = match rfs::seek(src, SeekFrom::Hole(data)) {
            Ok(h) => h.min(len),
            Err(_) => len,
        };
        copy_range(src, dst, data, hole)?;
        offset = hole.max(data + 1);
    }
    dst.set_len(len)
}

/// Copies bytes `[start, end)` of `src` to the same offsets of `dst`.
fn copy_range(src: &File, dst: &File, start: u64, end: u64) -> io::Result<()> {
    let mut pos = start;
    while pos < end {
        let mut off_in = pos;
        let mut off_out = pos;
        let want = usize::try_from(end - pos)
            .unwrap_or(usize::MAX)
            .min(1 << 30);
        match rfs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want) {
            Ok(0) => return Ok(()), // the source got shorter
            Ok(n) => pos += n as u64,
            Err(Errno::INTR) => {}
            Err(Errno::XDEV | Errno::NOSYS | Errno::INVAL | Errno::OPNOTSUPP) => {
                return copy_range_rw(src, dst, pos, end);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `copy_range` with plain positioned reads and writes.
fn copy_range_rw(src: &File, dst: &File, start: u64, end: u64) -> io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let mut pos = start;
    while pos < end {
        let want = (end - pos).min(CHUNK as u64) as usize;
        let n = src.read_at(&mut buf[..want], pos)?;
        if n == 0 {
            return Ok(());
        }
        dst.write_all_at(&buf[..n], pos)?;
        pos += n as u64;
    }
    Ok(())
}

/// fsyncs a directory, so that entries created or removed in it survive a crash.
pub fn sync_dir(dir: BorrowedFd<'_>) -> io::Result<()> {
    rfs::fsync(dir).map_err(Into::into)
}

/// Reads regular file `name` in `dir` without following a symbolic link. `Ok(None)` when it
/// does not exist.
pub fn read_file(dir: BorrowedFd<'_>, name: &str) -> io::Result<Option<Vec<u8>>> {
    let cname = c(name)?;
    let fd = match rfs::openat(
        dir,
        &*cname,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(refusal(dir, &cname, e, "a regular file")),
    };
    let mut file = File::from(fd);
    let st = rfs::fstat(&file).map_err(|e| at(name, e))?;
    if file_type(&st) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} is not a regular file"),
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| at(name, e))?;
    Ok(Some(bytes))
}

/// Replaces file `name` in `dir` with `bytes` atomically: `tmp_name` is written and fsynced,
/// renamed over `name`, and `dir` is fsynced. A symbolic link at either name is replaced, never
/// followed.
pub fn write_atomic(
    dir: BorrowedFd<'_>,
    name: &str,
    tmp_name: &str,
    bytes: &[u8],
) -> io::Result<()> {
    let ctmp = c(tmp_name)?;
    let cname = c(name)?;
    match rfs::unlinkat(dir, &*ctmp, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(at(tmp_name, e)),
    }
    let fd = rfs::openat(
        dir,
        &*ctmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| at(tmp_name, e))?;
    let mut file = File::from(fd);
    file.write_all(bytes).map_err(|e| at(tmp_name, e))?;
    file.sync_all().map_err(|e| at(tmp_name, e))?;
    drop(file);
    rfs::renameat(dir, &*ctmp, dir, &*cname).map_err(|e| at(name, e))?;
    sync_dir(dir).map_err(|e| at(".", e))
}

/// Total and available bytes of the filesystem holding `dir` (`statvfs`: blocks and blocks
/// available to unprivileged users, in fragment-size units).
pub fn fs_space(dir: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = rfs::fstatvfs(dir)?;
    let total = st.f_blocks.saturating_mul(st.f_frsize);
    let avail = st.f_bavail.saturating_mul(st.f_frsize);
    Ok((total, avail))
}

/// The device (`st_dev`) holding `fd`, as (major, minor).
pub fn device_of(fd: BorrowedFd<'_>) -> io::Result<(u32, u32)> {
    let st = rfs::fstat(fd)?;
    Ok((rfs::major(st.st_dev), rfs::minor(st.st_dev)))
}

/// The device a block-special file stands for (`st_rdev`), as (major, minor).
pub fn rdev_of(path: &Path) -> io::Result<Option<(u32, u32)>> {
    let st = rfs::stat(path)?;
    if file_type(&st) != FileType::BlockDevice {
        return Ok(None);
    }
    Ok(Some((rfs::major(st.st_rdev), rfs::minor(st.st_rdev))))
}
