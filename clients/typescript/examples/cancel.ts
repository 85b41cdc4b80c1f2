// Cancelling: a request, then every open request of a task (the token needs the scope cancel).
import { AlreadyEndedError, CancelledError, Client } from "@personaq/client";

const personaq = new Client();
const sub = await personaq.submit({ persona: "slowpoke", task_id: "story-45", step: "plan" });
await personaq.submit({ persona: "echo", task_id: "story-45", step: "code" });
const st = await personaq.cancel(sub.request_id, { reason: "workflow cancelled upstream" });
console.log(st.status, st.record?.detail, st.record?.cancelled_by); // cancelled, the reason, the token's name
try {
  await personaq.wait(sub.request_id, { deadline: sub.deadline });
} catch (err) {
  if (!(err instanceof CancelledError)) throw err; // a StoppedError, like the other outcomes
  console.log("cancelled by", err.record.cancelled_by);
}
try {
  await personaq.cancel(sub.request_id);
} catch (err) {
  if (!(err instanceof AlreadyEndedError)) throw err; // ended first (here: by the cancel above); its record is kept
  console.log("already ended:", err.record?.outcome);
}
const { cancelled, already_ended } = await personaq.cancelTask("story-45", { reason: "story dropped" });
console.log(cancelled.length, "cancelled,", already_ended.length, "had ended");
