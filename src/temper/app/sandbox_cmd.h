// `temper sandbox`: the sandbox for reward programs in any language. Reads JSON requests from stdin, one or more
// in a row: {"code": "...", "tests": ["assert f(1) == 2", ...], "limits": {"cpu_s": 2, "wall_s": 5, "memory_mb":
// 512, "max_procs": 16, "file_mb": 16, "open_files": 64, "output_kb": 64}} (limits and each key optional), and
// prints one JSON line per request: {"passed":k,"total":n,"error":"...","timed_out":false}. The code and its tests
// run in sandbox/python_tests.h's harness. A malformed request exits 2 naming the field; a sandbox that cannot be
// built exits 1 naming what is missing.
#pragma once

namespace temper::app {

int sandbox_cmd();

}  // namespace temper::app
