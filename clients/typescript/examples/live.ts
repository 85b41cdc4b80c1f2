// Live output: show what a streaming persona writes while it works.
import { Client } from "@personaq/client";

const personaq = new Client();
const sub = await personaq.submit({ persona: "reviewer", task_id: "story-46", step: "review" });
const live = personaq.liveOutput(sub.request_id);
for await (const ev of live) {
  if (ev.type === "output_superseded") console.log(`[attempt ${ev.attempt} starts over]`); // void what attempts up to ev.supersedes wrote
  else console.log(ev.chunk.attempt, ev.chunk.offset, JSON.stringify(ev.chunk.data)); // text as it is written
}
console.log(live.status?.status, live.status?.record?.attempts); // the terminal status, with its record
