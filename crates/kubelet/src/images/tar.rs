//! A minimal ustar writer: directories, regular files and symlinks, which is all
//! an image layer built here needs.

/// Builds a tar archive in memory.
#[derive(Default)]
pub struct TarBuilder {
    out: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
#[error("path {0:?} is too long for a ustar header")]
pub struct PathTooLong(pub String);

const BLOCK: usize = 512;

impl TarBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dir(&mut self, path: &str, mode: u32) -> Result<(), PathTooLong> {
        let p = format!("{}/", path.trim_end_matches('/'));
        self.header(&p, mode, 0, b'5', "")
    }

    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> Result<(), PathTooLong> {
        self.header(path, mode, data.len() as u64, b'0', "")?;
        self.out.extend_from_slice(data);
        let pad = (BLOCK - data.len() % BLOCK) % BLOCK;
        self.out.extend(std::iter::repeat_n(0u8, pad));
        Ok(())
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<(), PathTooLong> {
        self.header(path, 0o777, 0, b'2', target)
    }

    /// The archive with its two zero end blocks.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.extend(std::iter::repeat_n(0u8, 2 * BLOCK));
        self.out
    }

    fn header(
        &mut self,
        path: &str,
        mode: u32,
        size: u64,
        kind: u8,
        link: &str,
    ) -> Result<(), PathTooLong> {
        let mut h = [0u8; BLOCK];
        // Long paths go to the ustar prefix field (155 bytes) split at a '/'.
        let (prefix, name) = split_path(path).ok_or_else(|| PathTooLong(path.to_string()))?;
        if link.len() > 100 {
            return Err(PathTooLong(link.to_string()));
        }
        h[..name.len()].copy_from_slice(name.as_bytes());
        octal(&mut h[100..108], mode as u64);
        octal(&mut h[108..116], 0); // uid
        octal(&mut h[116..124], 0); // gid
        octal(&mut h[124..136], size);
        octal(&mut h[136..148], 0); // mtime: reproducible archives
        h[148..156].fill(b' ');
        h[156] = kind;
        h[157..157 + link.len()].copy_from_slice(link.as_bytes());
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
        let sum: u32 = h.iter().map(|&b| b as u32).sum();
        let s = format!("{sum:06o}\0 ");
        h[148..156].copy_from_slice(s.as_bytes());
        self.out.extend_from_slice(&h);
        Ok(())
    }
}

fn split_path(path: &str) -> Option<(&str, &str)> {
    if path.len() <= 100 {
        return Some(("", path));
    }
    let cut = path[..path.len().min(156)].rfind('/')?;
    let (prefix, name) = (&path[..cut], &path[cut + 1..]);
    (prefix.len() <= 155 && name.len() <= 100 && !name.is_empty()).then_some((prefix, name))
}

/// NUL-terminated zero-padded octal, as tar headers want.
fn octal(field: &mut [u8], v: u64) {
    let s = format!("{v:0width$o}\0", width = field.len() - 1);
    field.copy_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_name(block: &[u8]) -> String {
        let end = block[..100].iter().position(|&b| b == 0).unwrap_or(100);
        String::from_utf8_lossy(&block[..end]).into_owned()
    }

    #[test]
    fn entries_are_block_aligned_with_valid_checksums() {
        let mut t = TarBuilder::new();
        t.dir("bin", 0o755).unwrap();
        t.file("bin/hello", 0o755, b"hi\n").unwrap();
        t.symlink("bin/sh", "/bin/busybox").unwrap();
        let out = t.finish();
        assert_eq!(out.len() % BLOCK, 0);
        // dir header, file header + 1 data block, symlink header, 2 end blocks.
        assert_eq!(out.len(), 6 * BLOCK);
        assert_eq!(header_name(&out[..BLOCK]), "bin/");
        assert_eq!(header_name(&out[BLOCK..2 * BLOCK]), "bin/hello");
        assert_eq!(&out[2 * BLOCK..2 * BLOCK + 3], b"hi\n");
        for block in [
            &out[..BLOCK],
            &out[BLOCK..2 * BLOCK],
            &out[3 * BLOCK..4 * BLOCK],
        ] {
            let mut b = block.to_vec();
            let stored = u32::from_str_radix(
                std::str::from_utf8(&b[148..154])
                    .unwrap()
                    .trim_matches('\0'),
                8,
            )
            .unwrap();
            b[148..156].fill(b' ');
            assert_eq!(stored, b.iter().map(|&x| x as u32).sum::<u32>());
        }
        assert_eq!(out[3 * BLOCK + 156], b'2');
        assert_eq!(
            header_name(&out[3 * BLOCK + 157..4 * BLOCK]),
            "/bin/busybox"
        );
    }

    #[test]
    fn long_paths_use_the_prefix_field_or_fail() {
        let long = format!("{}/{}", "d".repeat(120), "f");
        let mut t = TarBuilder::new();
        t.file(&long, 0o644, b"").unwrap();
        let out = t.finish();
        assert_eq!(header_name(&out[..BLOCK]), "f");
        assert_eq!(&out[345..465], "d".repeat(120).as_bytes());
        let mut t = TarBuilder::new();
        assert!(t.file(&"x".repeat(300), 0o644, b"").is_err());
    }
}
