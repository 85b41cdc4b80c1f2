// README.md's code blocks are the examples' files, compiled by tsc with
// the package; the loop runs against the live personaq.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";
import { noLive, noStreaming } from "./live.js";

const root = new URL("../../", import.meta.url);

function tsBlocks(text: string): string[] {
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
}

test("every ts block of the READMEs is an example file, verbatim", () => {
  const examples = readdirSync(new URL("examples/", root)).map((f) => readFileSync(new URL(`examples/${f}`, root), "utf8"));
  const readme = readFileSync(new URL("README.md", root), "utf8");
  assert.ok(tsBlocks(readme).length > 0, "README.md has ts blocks");
  assert.ok(!readme.replace(/```ts\n[\s\S]*?```/g, "").includes("```"), "README.md has only ts code blocks");
  // The repository's README shows the same loop among the other languages'.
  const top = readFileSync(new URL("../../README.md", root), "utf8");
  for (const b of [...tsBlocks(readme), ...tsBlocks(top)]) assert.ok(examples.includes(b), `README block is no example file:\n${b}`);
});

/** Runs an example file (compiled) and returns what it logged. */
async function runExample(name: string): Promise<unknown[][]> {
  const logged: unknown[][] = [];
  const log = console.log;
  console.log = (...args: unknown[]) => void logged.push(args);
  try {
    await import(`../examples/${name}.js`);
  } finally {
    console.log = log;
  }
  return logged;
}

test("the README's loop runs against personaq", { skip: noLive }, async () => {
  const logged = await runExample("loop");
  assert.equal(logged.length, 1);
  assert.equal(logged[0][0], "plan:");
  assert.match(String(logged[0][1]), /"input":\{"goal":"add retries"\}/);
});

test("the README's cancelling runs against personaq", { skip: noLive }, async () => {
  const logged = await runExample("cancel");
  assert.deepEqual(logged.slice(0, 3), [
    ["cancelled", "workflow cancelled upstream", "env"],
    ["cancelled by", "env"],
    ["already ended:", "cancelled"],
  ]);
  assert.equal(logged.length, 4);
  assert.equal(logged[3][1], "cancelled,");
});

test("the README's live output runs against personaq", { skip: noStreaming }, async () => {
  const logged = await runExample("live");
  const last = logged.pop();
  assert.deepEqual(last, ["succeeded", 1]);
  // Chunk boundaries depend on timing; the text they carry does not.
  assert.ok(logged.every((l) => l[0] === 1 && typeof l[1] === "number"), JSON.stringify(logged));
  assert.equal(logged.map((l) => JSON.parse(String(l[2]))).join(""), "Reading the code.\nThe change is sound.\n");
});
