// How many threads the CPU engine runs llama.cpp on: one pure function of the cores the browser
// reports, the page's cross-origin isolation and the user's setting (cpu_threads, 0: automatic).
// cpu.js runs it, and its cpuEngineInfo tells Settings (through engine-choice.js) what 0 gives.
// No imports, so Node checks it alone (tests/web/test_cpu_threads.py).

// llama.cpp's thread pool in the pthread builds (scripts/cpu_engine/build.sh, PTHREAD_POOL_SIZE):
// min(16, cores) helper threads, made when llama.cpp's worker starts (4 when the browser reports
// no count). A computation runs on the engine's own thread and up to all of them (al_load caps
// n_threads at the pool + 1).
const POOL_MOST = 16;
const POOL_UNKNOWN = 4;

/** The most threads llama.cpp's pool runs with `cores` reported (0 or undefined: unknown). */
function poolThreads(cores) {
  return Math.min(POOL_MOST, cores > 0 ? cores : POOL_UNKNOWN) + 1;
}

/**
 * The threads the CPU engine uses: the user's `setting` when above 0, else the reported cores
 * less one (for the page and the agent's worker), but two on two cores, where those two mostly
 * wait while the model computes (docs/page.md); never more than the pool runs. One without
 * cross-origin isolation: threads need SharedArrayBuffer.
 * @returns {{threads: number, automatic: number, most: number}}  `automatic` is what a setting
 *   of 0 gives, `most` the cap (a setting above it is clamped)
 */
export function cpuThreads(cores, isolated, setting = 0) {
  if (!isolated) return { threads: 1, automatic: 1, most: 1 };
  const known = cores > 0 ? cores : 2; // unknown: the two of a small machine
  const most = poolThreads(cores);
  const automatic = Math.min(Math.max(known - 1, Math.min(known, 2)), most);
  const wanted = Number.isInteger(setting) && setting > 0 ? setting : automatic;
  return { threads: Math.min(wanted, most), automatic, most };
}
