//! The human report of a check (the `check` command and the TUI dialog):
//! one header line, then per member who holds it, who waits, and the
//! verdict. Invariant: says only what the [`CheckReport`] says.

use std::time::SystemTime;

use super::CheckReport;

/// Human lines for a report (the `check` command and the TUI dialog).
pub fn report_lines(report: &CheckReport, now: SystemTime) -> Vec<String> {
    let only_unlinked = report
        .members
        .iter()
        .filter(|member| member.busy)
        .all(|member| member.holders.is_empty() && !member.held_unlinked.is_empty());
    let mut lines = vec![if report.free {
        "free: the whole family could be taken now".to_string()
    } else if only_unlinked {
        "busy: the family looks free, but a live process holds a member through an \
         unlinked file (SDK create race)"
            .to_string()
    } else {
        "busy: the family cannot be taken now".to_string()
    }];
    for member in &report.members {
        let label = crate::disk::key::label(member.kind, &member.name);
        if !member.busy {
            lines.push(format!("  free  {label}"));
            continue;
        }
        for held in &member.held_unlinked {
            lines.push(format!(
                "  busy  {label} looks free, but pid {} holds its {file}, which was unlinked: \
                 no probe sees that lock, and another process can lock a new {file} at that \
                 path (SDK create race) — {}",
                held.process.pid,
                held.process.command(),
                file = held.file.as_str(),
            ));
        }
        if member.holders.is_empty() && member.held_unlinked.is_empty() {
            lines.push(format!(
                "  busy  {label} (holder not visible: in this process, or it just left)"
            ));
        }
        for holder in &member.holders {
            let held_for = holder.since.map_or_else(
                || "for an unknown time".to_string(),
                |since| format!("for {}", crate::time_format::age(since, now)),
            );
            let how = if holder.shared {
                "held SHARED (not an SDK holder; it blocks every acquire) by"
            } else {
                "held by"
            };
            lines.push(format!(
                "  busy  {label} {how} pid {} {} — {}{}",
                holder.process.pid,
                held_for,
                holder.process.command(),
                holder.process.holder_mark()
            ));
            if !holder.also_holds.is_empty() {
                lines.push(format!(
                    "        pid {} also holds: {}",
                    holder.process.pid,
                    holder.also_holds.join(", ")
                ));
            }
        }
        for (what, waiting) in [
            ("waits to take it (wait_acquire)", &member.contenders),
            ("waits for its release (wait_released)", &member.watchers),
        ] {
            for process in waiting {
                let since = process.started.map_or_else(String::new, |started| {
                    format!(" (running for {})", crate::time_format::age(started, now))
                });
                lines.push(format!(
                    "        pid {} {what}{since} — {}",
                    process.pid,
                    process.command()
                ));
            }
        }
        if let Some(refused) = &member.refused {
            lines.push(format!("        {}", refused.describe()));
        }
        if let Some(verdict) = &member.verdict {
            lines.push(format!("        verdict: {}", verdict.describe(now)));
        }
    }
    // Names and command lines are anyone's text: each line is made inert
    // (nothing of ours in it is a control character).
    lines
        .into_iter()
        .map(|line| crate::text::visible(&line).into_owned())
        .collect()
}
