// README.md's code blocks are the examples' files, compiled by tsc with
// the package; the loop runs against the live personaq.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";
import { noLive } from "./live.js";

const root = new URL("../../", import.meta.url);

test("every ts block of README.md is an example file, verbatim", () => {
  const readme = readFileSync(new URL("README.md", root), "utf8");
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.length > 0, "README.md has ts blocks");
  const examples = readdirSync(new URL("examples/", root)).map((f) => readFileSync(new URL(`examples/${f}`, root), "utf8"));
  for (const b of blocks) assert.ok(examples.includes(b), `README block is no example file:\n${b}`);
  assert.ok(!readme.replace(/```ts\n[\s\S]*?```/g, "").includes("```"), "README.md has only ts code blocks");
});

test("the README's loop runs against personaq", { skip: noLive }, async () => {
  const logged: unknown[][] = [];
  const log = console.log;
  console.log = (...args: unknown[]) => void logged.push(args);
  try {
    await import("../examples/loop.js");
  } finally {
    console.log = log;
  }
  assert.equal(logged.length, 1);
  assert.equal(logged[0][0], "plan:");
  assert.match(String(logged[0][1]), /"input":\{"goal":"add retries"\}/);
});
