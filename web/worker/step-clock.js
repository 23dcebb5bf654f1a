// Orchestration time per step of the current run, outside the engine: the steps of a task run
// together, so the run is cut into one segment per task (the next task starts at its first
// step_started after a reflection; the first segment includes planning, the last the answer)
// and each segment's time less the engine's, divided by its steps, is one sample per step.
// scripts/bench_page.py reports them.
export function createStepClock() {
  return {
    engineMs: 0,
    open: null, // {at, engineMs, steps, ending}
    samples: [],
    reset() {
      this.engineMs = 0;
      this.samples = [];
      this.open = { at: performance.now(), engineMs: 0, steps: 0, ending: false };
    },
    onEvent(type) {
      if (!this.open) return;
      if (type === "reflection") this.open.ending = true;
      if (type !== "step_started") return;
      if (this.open.ending) this.close();
      this.open.steps += 1;
    },
    close() {
      const now = performance.now();
      const { at, engineMs, steps } = this.open;
      const perStep = (now - at - (this.engineMs - engineMs)) / steps;
      if (steps) this.samples.push(...Array(steps).fill(Math.round(perStep * 1000) / 1000));
      this.open = { at: now, engineMs: this.engineMs, steps: 0, ending: false };
    },
    finish() {
      this.close();
      this.open = null;
      return this.samples;
    },
    /** Runs the engine's `work`, whose time the clock leaves out. */
    async engineTime(work) {
      const started = performance.now();
      try {
        return await work();
      } finally {
        this.engineMs += performance.now() - started;
      }
    },
  };
}
