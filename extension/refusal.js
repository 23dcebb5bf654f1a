// A request the bridge refuses, with the kind the page is told ("refused" by a rule or the user,
// "too-large", "network"); any other error of a request is described by relay.js.
export class Refusal extends Error {
  constructor(message, kind = "refused") {
    super(message);
    this.kind = kind;
  }
}
