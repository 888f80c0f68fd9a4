// A small JSON reader for what a plugin reads whole: its configuration
// (configJSON in index.ts). AssemblyScript's standard library has no
// JSON; fields of the event's and cached objects are read with
// field_read instead, parse-free.
//
//   const c = ih.configJSON();
//   if (c === null) return ih.jsonError();   // from onInit: refuses the config
//   const key = c.getString("key", "team");

export const JSON_NULL: i32 = 0;
export const JSON_BOOL: i32 = 1;
export const JSON_NUMBER: i32 = 2;
export const JSON_STRING: i32 = 3;
export const JSON_ARRAY: i32 = 4;
export const JSON_OBJECT: i32 = 5;

// A JSON value: kind says which of the fields holds it. An object's
// members are keys[i] -> items[i], in the order written.
export class JSONValue {
  kind: i32 = JSON_NULL;
  bool: bool = false;
  num: f64 = 0;
  // A string's value; a number's text as written.
  str: string = "";
  items: JSONValue[] = [];
  keys: string[] = [];

  // The member key of an object (the last one of that name), or null.
  get(key: string): JSONValue | null {
    if (this.kind != JSON_OBJECT) return null;
    for (let i = this.keys.length - 1; i >= 0; i--) {
      if (this.keys[i] == key) return this.items[i];
    }
    return null;
  }
  // Element i of an array, or null.
  at(i: i32): JSONValue | null {
    if (this.kind != JSON_ARRAY || i < 0 || i >= this.items.length) return null;
    return this.items[i];
  }
  // The string member key, or def when there is none or it is no string.
  getString(key: string, def: string): string {
    const v = this.get(key);
    return v !== null && v.kind == JSON_STRING ? v.str : def;
  }
  getNumber(key: string, def: f64): f64 {
    const v = this.get(key);
    return v !== null && v.kind == JSON_NUMBER ? v.num : def;
  }
  getBool(key: string, def: bool): bool {
    const v = this.get(key);
    return v !== null && v.kind == JSON_BOOL ? v.bool : def;
  }
  isNull(): bool { return this.kind == JSON_NULL; }

  // Sets member key of an object (replacing one of that name), making
  // this an object first if it is not one; returns this, for chaining:
  // jsonObject().set("apiVersion", jsonStringValue("v1")).set("kind", jsonStringValue("Service")).
  set(key: string, v: JSONValue): JSONValue {
    if (this.kind != JSON_OBJECT) {
      this.kind = JSON_OBJECT;
      this.keys = [];
      this.items = [];
    }
    for (let i = 0; i < this.keys.length; i++) {
      if (this.keys[i] == key) {
        this.items[i] = v;
        return this;
      }
    }
    this.keys.push(key);
    this.items.push(v);
    return this;
  }
  // Appends v to an array (making this one first); returns this.
  push(v: JSONValue): JSONValue {
    if (this.kind != JSON_ARRAY) {
      this.kind = JSON_ARRAY;
      this.keys = [];
      this.items = [];
    }
    this.items.push(v);
    return this;
  }
  // Compact JSON, object members in the order written.
  stringify(): string {
    switch (this.kind) {
      case JSON_BOOL: return this.bool ? "true" : "false";
      case JSON_NUMBER: return this.str;
      case JSON_STRING: return quoteJSON(this.str);
      case JSON_ARRAY: {
        const parts: string[] = [];
        for (let i = 0; i < this.items.length; i++) parts.push(this.items[i].stringify());
        return "[" + parts.join(",") + "]";
      }
      case JSON_OBJECT: {
        const parts: string[] = [];
        for (let i = 0; i < this.items.length; i++) parts.push(quoteJSON(this.keys[i]) + ":" + this.items[i].stringify());
        return "{" + parts.join(",") + "}";
      }
    }
    return "null";
  }
}

// The builders of apply bodies, children and status: no JSON by hand.
export function jsonObject(): JSONValue {
  const v = new JSONValue();
  v.kind = JSON_OBJECT;
  return v;
}
export function jsonArray(items: JSONValue[] = []): JSONValue {
  const v = new JSONValue();
  v.kind = JSON_ARRAY;
  v.items = items;
  return v;
}
export function jsonStringValue(s: string): JSONValue {
  const v = new JSONValue();
  v.kind = JSON_STRING;
  v.str = s;
  return v;
}
export function jsonInt(n: i64): JSONValue {
  const v = new JSONValue();
  v.kind = JSON_NUMBER;
  v.num = <f64>n;
  v.str = n.toString();
  return v;
}
export function jsonNumber(n: f64): JSONValue {
  if (n == Math.floor(n) && Math.abs(n) < 9007199254740992) return jsonInt(<i64>n);
  const v = new JSONValue();
  v.kind = JSON_NUMBER;
  v.num = n;
  v.str = n.toString();
  return v;
}
export function jsonBool(b: bool): JSONValue {
  const v = new JSONValue();
  v.kind = JSON_BOOL;
  v.bool = b;
  return v;
}

// s as a JSON string (index.ts's jsonString).
export function quoteJSON(s: string): string {
  let out = "\"";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) out += "\\\"";
    else if (c == 0x5c) out += "\\\\";
    else if (c < 0x20) {
      const hex = c.toString(16);
      out += "\\u" + "0000".substring(hex.length) + hex;
    } else out += String.fromCharCode(c);
  }
  return out + "\"";
}

let parseError = "";

// Why the last parseJSON returned null: what and at which character.
export function jsonError(): string {
  return parseError;
}

// Parses one JSON value (RFC 8259) surrounded by whitespace only; null
// (and jsonError) when the text is not JSON.
export function parseJSON(text: string): JSONValue | null {
  const p = new Parser(text);
  const v = p.value(0);
  if (v === null) return null;
  p.ws();
  if (p.i != text.length) return p.fail("text after the value");
  parseError = "";
  return v;
}

class Parser {
  i: i32 = 0;
  constructor(public s: string) {}

  fail(what: string): JSONValue | null {
    parseError = what + " at character " + this.i.toString();
    return null;
  }
  ws(): void {
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }
  eat(t: string): bool {
    if (this.s.substring(this.i, this.i + t.length) != t) return false;
    this.i += t.length;
    return true;
  }
  value(depth: i32): JSONValue | null {
    if (depth > 512) return this.fail("nesting over 512 levels");
    this.ws();
    if (this.i >= this.s.length) return this.fail("unexpected end");
    const c = this.s.charCodeAt(this.i);
    const v = new JSONValue();
    if (c == 0x7b) { // {
      this.i++;
      v.kind = JSON_OBJECT;
      this.ws();
      if (this.eat("}")) return v;
      while (true) {
        this.ws();
        if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 0x22) return this.fail("expected a member name");
        const k = this.string();
        if (k === null) return null;
        this.ws();
        if (!this.eat(":")) return this.fail("expected :");
        const x = this.value(depth + 1);
        if (x === null) return null;
        v.keys.push(k);
        v.items.push(x);
        this.ws();
        if (this.eat("}")) return v;
        if (!this.eat(",")) return this.fail("expected , or }");
      }
    }
    if (c == 0x5b) { // [
      this.i++;
      v.kind = JSON_ARRAY;
      this.ws();
      if (this.eat("]")) return v;
      while (true) {
        const x = this.value(depth + 1);
        if (x === null) return null;
        v.items.push(x);
        this.ws();
        if (this.eat("]")) return v;
        if (!this.eat(",")) return this.fail("expected , or ]");
      }
    }
    if (c == 0x22) {
      const t = this.string();
      if (t === null) return null;
      v.kind = JSON_STRING;
      v.str = t;
      return v;
    }
    if (this.eat("true")) { v.kind = JSON_BOOL; v.bool = true; return v; }
    if (this.eat("false")) { v.kind = JSON_BOOL; return v; }
    if (this.eat("null")) return v;
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    return this.fail("unexpected character");
  }
  number(): JSONValue | null {
    const start = this.i;
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (!((c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x2b || c == 0x2e || c == 0x65 || c == 0x45)) break;
      this.i++;
    }
    const t = this.s.substring(start, this.i);
    const digits = t.startsWith("-") ? t.substring(1) : t;
    if (digits.length == 0 || digits.charCodeAt(0) < 0x30 || digits.charCodeAt(0) > 0x39 || t.endsWith(".")) {
      this.i = start;
      return this.fail("a bad number");
    }
    if (digits.length > 1 && digits.charCodeAt(0) == 0x30 && digits.charCodeAt(1) >= 0x30 && digits.charCodeAt(1) <= 0x39) {
      return this.fail("a number with a leading zero");
    }
    const n = parseFloat(t);
    if (!isFinite(n)) {
      this.i = start;
      return this.fail("a bad number");
    }
    const v = new JSONValue();
    v.kind = JSON_NUMBER;
    v.num = n;
    v.str = t;
    return v;
  }
  // The string at i (at its opening quote); null and parseError if bad.
  string(): string | null {
    this.i++;
    let out = "";
    let from = this.i;
    while (true) {
      if (this.i >= this.s.length) {
        this.fail("unterminated string");
        return null;
      }
      const c = this.s.charCodeAt(this.i);
      if (c == 0x22) {
        out += this.s.substring(from, this.i);
        this.i++;
        return out;
      }
      if (c < 0x20) {
        this.fail("a control character in a string");
        return null;
      }
      if (c != 0x5c) {
        this.i++;
        continue;
      }
      out += this.s.substring(from, this.i);
      const e = this.i + 1 < this.s.length ? this.s.charCodeAt(this.i + 1) : 0;
      this.i += 2;
      if (e == 0x22) out += "\"";
      else if (e == 0x5c) out += "\\";
      else if (e == 0x2f) out += "/";
      else if (e == 0x62) out += "\b";
      else if (e == 0x66) out += "\f";
      else if (e == 0x6e) out += "\n";
      else if (e == 0x72) out += "\r";
      else if (e == 0x74) out += "\t";
      else if (e == 0x75) {
        const h = this.s.substring(this.i, this.i + 4);
        const code = I32.parseInt(h, 16);
        if (h.length != 4 || isNaN(<f64>code) || !isHex(h)) {
          this.fail("a bad \\u escape");
          return null;
        }
        out += String.fromCharCode(code);
        this.i += 4;
      } else {
        this.i -= 2;
        this.fail("a bad escape");
        return null;
      }
      from = this.i;
    }
  }
}

function isHex(h: string): bool {
  for (let i = 0; i < h.length; i++) {
    const c = h.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}
