// JSON Schemas bounded for llama.cpp's grammars: the CPU engine has llama.cpp turn a call's
// schema into a grammar, and gives it a copy whose strings and arrays have bounds (the agent
// still validates the reply against the original).

const MAX_ITEMS = 8;

/**
 * A copy of a JSON Schema in which every string has a maxLength (at most maxChars) and every
 * array a maxItems, so a grammar built from it cannot run on until the reply budget is spent.
 */
export function boundedSchema(schema, maxChars) {
  if (Array.isArray(schema)) return schema.map((item) => boundedSchema(item, maxChars));
  if (!schema || typeof schema !== "object") return schema;
  const copy = {};
  for (const [key, value] of Object.entries(schema)) {
    copy[key] = key === "enum" || key === "const" || key === "default" || key === "examples"
      ? value
      : boundedSchema(value, maxChars);
  }
  const types = [].concat(copy.type ?? []);
  if (types.includes("string") && !copy.enum && !copy.const) {
    copy.maxLength = Math.min(copy.maxLength ?? maxChars, maxChars);
  }
  if (types.includes("array")) copy.maxItems = Math.min(copy.maxItems ?? MAX_ITEMS, MAX_ITEMS);
  return copy;
}
