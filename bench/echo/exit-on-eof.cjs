// Preloaded into server-everything by bench/echo.sh (node --require):
// the server exits as soon as its stdin ends. Without it, the server lives
// at least 350 ms after initialize (a timer it sets to ask for roots), so
// a short run's close waits for that timer and a longer run's does not,
// which hides up to 350 ms of calls from (t(N) - t(0)).
"use strict";
process.stdin.on("end", () => process.exit(0));
