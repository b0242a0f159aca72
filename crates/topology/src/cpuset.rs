//! Linux cpulists (`0-3,8,10-11`), as `cpuset.cpus` and sysfs write them.
//! (Stub of the list formatter; the CPU set type follows.)

/// Formats sorted ids as a Linux list: runs of consecutive ids become ranges.
pub fn format_list(ids: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let mut end = start;
        while i + 1 < ids.len() && ids[i + 1] == end + 1 {
            i += 1;
            end = ids[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}
