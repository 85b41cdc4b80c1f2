// The orchestrator's loop: submit, await under the step budget, act on the terminal record.
import { BlockedError, Client, StoppedError } from "@personaq/client";

const personaq = new Client(); // reads PERSONAQ_URL and PERSONAQ_API_TOKEN
try {
  const { output } = await personaq.run({ persona: "echo", task_id: "story-42", step: "plan", input: { goal: "add retries" } });
  console.log("plan:", JSON.stringify(output)); // the persona's answer
} catch (err) {
  if (!(err instanceof StoppedError)) throw err; // the API refused (ApiError) or stayed unreachable (ConnectionError)
  const r = err.record; // outcome, reason, attempts, last error, quarantine seq
  console.log(err instanceof BlockedError ? "blocked:" : "stopped:", r?.outcome, r?.reason, r?.quarantine_seq, r?.last_error);
}
