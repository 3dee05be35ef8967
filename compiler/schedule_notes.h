// schedule_notes: what the schedule passes (reduction_schedule, split_reductions, thread_tiles)
// decided per kernel and why, collected by lower() for the `// Schedule:` lines of the dumps.
#pragma once

#include <map>
#include <string>

namespace adjoint::compiler {

/// kernel name -> the schedule its reductions use and why (one line each, for the dumps).
using ScheduleNotes = std::map<std::string, std::string>;

/// Appends `line` to `notes[kernel]` (a new line when there is text already).
inline void add_schedule_note(ScheduleNotes& notes, const std::string& kernel,
                              const std::string& line) {
  std::string& text = notes[kernel];
  text += (text.empty() ? "" : "\n") + line;
}

}  // namespace adjoint::compiler
