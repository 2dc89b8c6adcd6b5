/**
 * JSON text of values of any depth. `JSON.stringify` recurses once per level and runs out of stack on a
 * client field nested a few thousand levels deep, which would stop every write of the index holding it;
 * this walks the value with a stack of its own instead, and writes what `JSON.stringify` writes.
 */

/** The value `JSON.stringify` writes for `value` under `key`: `toJSON` applied, primitive wrappers unwrapped. */
function prepared(value: unknown, key: string): unknown {
  if (typeof value !== 'object' || value === null) return value;
  let v: unknown = value;
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') v = (v as { toJSON: (key: string) => unknown }).toJSON(key);
  if (typeof v !== 'object' || v === null) return v;
  // Parsed JSON holds plain objects and arrays only; anything else may be a wrapper to unwrap.
  const proto = Object.getPrototypeOf(v);
  if (proto === Object.prototype || proto === Array.prototype || proto === null) return v;
  if (v instanceof Number || v instanceof String || v instanceof Boolean) return v.valueOf();
  return v;
}

/** The text of a value that is not a container, or undefined for what JSON leaves out (undefined, functions, symbols). */
function scalarText(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new TypeError('Do not know how to serialize a BigInt');
    case 'object':
      return 'null';
    default:
      return undefined;
  }
}

function isContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/** True when a value holds no container, so `JSON.stringify` cannot recurse into it past one level. */
export function isFlat(value: object): boolean {
  for (const field in value) if (isContainer((value as Record<string, unknown>)[field])) return false;
  return true;
}

/** `JSON.stringify(value)` (compact, no replacer) for a value of any depth; a cycle throws as there. */
export function jsonText(value: unknown): string | undefined {
  const top = prepared(value, '');
  if (!isContainer(top)) return scalarText(top);
  let out = '';
  // The containers being written, each with its keys (none for an array), the next one to write and whether one was.
  const nodes: object[] = [];
  const keyLists: (readonly string[] | undefined)[] = [];
  const nexts: number[] = [];
  const written: boolean[] = [];
  const onPath = new Set<object>();
  const open = (node: object): void => {
    if (onPath.has(node)) throw new TypeError('Converting circular structure to JSON');
    onPath.add(node);
    const array = Array.isArray(node);
    out += array ? '[' : '{';
    nodes.push(node);
    keyLists.push(array ? undefined : Object.keys(node));
    nexts.push(0);
    written.push(false);
  };
  open(top);
  while (nodes.length > 0) {
    const last = nodes.length - 1;
    const node = nodes[last];
    const keys = keyLists[last];
    const at = nexts[last];
    if (at === (keys ? keys.length : (node as unknown[]).length)) {
      out += keys ? '}' : ']';
      nodes.pop();
      keyLists.pop();
      nexts.pop();
      written.pop();
      onPath.delete(node);
      continue;
    }
    nexts[last] = at + 1;
    const key = keys ? keys[at] : String(at);
    const item = prepared((node as Record<string, unknown>)[key], key);
    const text = isContainer(item) ? undefined : scalarText(item);
    // An object leaves out what JSON cannot hold; an array writes null in its place.
    if (keys && text === undefined && !isContainer(item)) continue;
    const comma = written[last] ? ',' : '';
    written[last] = true;
    out += keys ? `${comma}${JSON.stringify(key)}:` : comma;
    if (isContainer(item)) open(item);
    else out += text ?? 'null';
  }
  return out;
}

/** True when two values write the same JSON; containers are compared by their text, whatever their depth. */
export function sameJson(a: unknown, b: unknown): boolean {
  return a === b || jsonText(a) === jsonText(b);
}
