"""The Redis key layout and its TTLs, in one place.

Pure names, no client: workflows build references with these functions and carry them, never the data (token
ids, log-probs and full message lists live in Redis; Temporal payloads stay small). Only the store's
repositories read and write under them.
"""

from __future__ import annotations

PREFIX = "oc"
DATA_TTL_S = 30 * 24 * 3600
"""The default of `redis.data_ttl_s`: per-turn and per-step data (requests, token data, teacher log-probs,
judgements, record streams, idempotency keys) expire after it, so Redis memory stays bounded. Keys without a TTL:
the sample streams (trained entries are deleted), API keys, policy version and updates."""


def api_key(key_hash: str) -> str:
    """JSON record of one API key, by the hash of the key."""
    return f"{PREFIX}:apikey:{key_hash}"


API_KEY_INDEX = f"{PREFIX}:apikeys"
"""Hash: key id -> key hash, for `keys list` / `keys revoke`."""


def chat_request(turn_id: str) -> str:
    """The chat request of one turn as the client sent it (messages, tools)."""
    return f"{PREFIX}:request:{turn_id}"


STREAM_TTL_S = 24 * 3600
"""Token streams are only a relay and a resume checkpoint; the turn's data outlives them."""
IDEMPOTENCY_TTL_S = 24 * 3600
"""How long an Idempotency-Key is remembered: far beyond any client's retry window (Stripe and OpenAI use a day)."""


def response_state(turn_id: str) -> str:
    """A Responses API turn's conversation (its history and answer), what `previous_response_id` continues."""
    return f"{PREFIX}:response:{turn_id}"


def token_stream(turn_id: str) -> str:
    """Redis stream of one turn's tokens as they are produced; also the resume checkpoint."""
    return f"{PREFIX}:stream:{turn_id}"


def idempotency(turn_id: str) -> str:
    """JSON record of the chat request an Idempotency-Key named (its session, digest and, once done, its result)."""
    return f"{PREFIX}:idempotency:{turn_id}"


def stream_owner(turn_id: str) -> str:
    """Which generation attempt may publish to the turn's stream (a stale attempt is fenced off)."""
    return f"{PREFIX}:stream:{turn_id}:owner"


def user_adapter(tenant: str) -> str:
    """JSON record of the LoRA adapter serving one user (store.adapters), by tenant pseudonym; no TTL."""
    return f"{PREFIX}:adapter:{tenant}"


def turn_data(turn_id: str) -> str:
    """Hash: prompt ids, response ids, rollout log-probs and weight version of one finished turn."""
    return f"{PREFIX}:turn:{turn_id}"


def prefix_link(user_id: str, digest: str) -> str:
    """Session id of the turn whose request + reply hash to `digest` (linking requests with no session hint)."""
    return f"{PREFIX}:prefix:{user_id}:{digest}"


def turn_log_segment(workflow_id: str, first_index: int) -> str:
    """Turn records archived when a session workflow continued as new."""
    return f"{PREFIX}:turnlog:{workflow_id}:{first_index}"


def teacher_logprobs(turn_id: str) -> str:
    """Packed float32 log-probs of the turn's response under the hint-enhanced context."""
    return f"{PREFIX}:teacher:{turn_id}"


def judgement(turn_id: str) -> str:
    """JSON summary of a judged turn (votes, reward, hint, advantage summary), for the audit."""
    return f"{PREFIX}:judge:{turn_id}"


def sample_stream(source: str) -> str:
    """Training samples of one source (`personal`, later `terminal`, `gui`, `swe`, `toolcall`)."""
    return f"{PREFIX}:samples:{source}"


def sample_published(sample_id: str) -> str:
    """Idempotency key: set once when the sample (or its drop) for a (session, turn) was published."""
    return f"{PREFIX}:published:{sample_id}"


def record_stream(source: str, policy_version: str) -> str:
    """Judged-turn records of one source and policy version (the audit's copy; expires with the turn data, the
    records/ JSONL files on disk are kept)."""
    return f"{PREFIX}:records:{source}:v{policy_version}"


def sample_mismatch(sample_id: str) -> str:
    """JSON of a trained sample's train-inference mismatch (store.mismatch), for the audit."""
    return f"{PREFIX}:mismatch:{sample_id}"


def session_effective(session_key: str) -> str:
    """Set once a session has produced an effective sample (the at-least-one rule)."""
    return f"{PREFIX}:effective:{session_key}"


POLICY_VERSION = f"{PREFIX}:policy:version"
"""The policy version the servers serve, set once every server has loaded it."""
POLICY_UPDATES = f"{PREFIX}:policy:updates"
"""One entry per served weight update (version, checkpoint, time): the serving side follows it."""
POLICY_UPDATES_MAXLEN = 10_000
EVAL_SCORES = f"{PREFIX}:eval:scores"
"""Evaluation scores per (policy version, set): store.evaluations."""


# ---- general-agent episodes: everything under the attempt's key, so a restarted attempt never mixes with it ----
def episode_attempt(episode_id: str, attempt: int) -> str:
    """The prefix of one attempt at an episode (its opening messages, each step's action and observation)."""
    return f"{PREFIX}:ep:{episode_id}:a{attempt}"


def episode_opening(attempt_key: str) -> str:
    """JSON: the opening messages (system, user) and the tools, written by env_open."""
    return f"{attempt_key}:open"


def episode_steps(attempt_key: str) -> str:
    """Hash of the attempt's steps: `a:<t>` the step's action (agent_step), `o:<t>` its observation (env_step).
    One hash, so a step reads the whole history, or any steps of it, in one call."""
    return f"{attempt_key}:steps"


def step_action_field(step: int) -> str:
    return f"a:{step}"


def step_observation_field(step: int) -> str:
    return f"o:{step}"


def episode_step_id(episode_id: str, attempt: int, step: int) -> str:
    """The id under which a step's token data is kept (`turn_data`), as a chat turn's is."""
    return f"{episode_id}:a{attempt}:s{step}"


EPISODE_TTL_S = DATA_TTL_S
"""Episode data is kept for the audit and for training lag, like chat requests."""


def episode_advantages(episode_id: str) -> str:
    """Hash: step index -> "reward advantage" of a finished episode's published steps (for `episodes show`)."""
    return f"{PREFIX}:ep:{episode_id}:adv"


# ---- a user's rights over their data (control.user_data) ----------------------------------------------------
# Keyed by the user's pseudonym (contracts.chat.tenant_of), never the user id: what is kept after a user is
# forgotten names no one in clear.
def user_turns(tenant: str) -> str:
    """Set: the ids of every chat turn a user's requests made (and their Idempotency-Key records' ids), written
    where the turn is stored; what export and forget find a user's per-turn keys by. Expires with the turn data."""
    return f"{PREFIX}:user:{tenant}:turns"


def user_groups(tenant: str) -> str:
    """Set: the ids of the client-driven task groups a user opened (`/v1/episodes`), written when one starts; with
    the groups' search attribute in Temporal, what export and forget find the user's episodes by. Expires with the
    episode data."""
    return f"{PREFIX}:user:{tenant}:groups"


def user_name(tenant: str) -> str:
    """The user id a pseudonym stands for, so an operator sees names where Temporal shows pseudonyms (workflow ids,
    `OpenclawUser`; control.sessions). Written with a key and with the user's turns and groups, deleted by the
    forget: then nothing maps the pseudonym back. No TTL."""
    return f"{PREFIX}:user-name:{tenant}"


def user_held_out(tenant: str) -> str:
    """Hash: turn id -> one held-out turn (contracts.progress.HeldOutTurn as JSON, sealed under encryption): kept
    aside from training for the user's progress report, `eval.progress.keep_turns` at most. No TTL: a report compares
    versions months apart. Exported and forgotten with the user's data."""
    return f"{PREFIX}:user:{tenant}:heldout"


def user_progress(tenant: str) -> str:
    """List: the user's progress reports (contracts.progress.ProgressReport as JSON, sealed), newest first,
    `eval.progress.keep_reports` at most. No TTL; exported and forgotten with the user's data."""
    return f"{PREFIX}:user:{tenant}:progress"


def progress_answers(tenant: str, run: str) -> str:
    """A report's new answers, between its two activities (the policy pool writes, the judge pool reads). Expires
    after a day: nothing else reads them."""
    return f"{PREFIX}:user:{tenant}:progress-answers:{run}"


PROGRESS_ANSWERS_TTL_S = 24 * 3600


def adapter_candidate(tenant: str) -> str:
    """Hash: the user's candidate adapter version under judgement (eval.canary): `version`, `ref` (its AdapterRef),
    `incumbent` (the one it is judged against, empty for the base), `since`. No TTL; forgotten with the user."""
    return f"{PREFIX}:adapter-candidate:{tenant}"


def adapter_next(tenant: str) -> str:
    """A newer adapter version (AdapterRef JSON) trained while a candidate was judged: proposed once that is
    decided. Forgotten with the user."""
    return f"{PREFIX}:adapter-next:{tenant}"


def adapter_go_back(tenant: str) -> str:
    """JSON: the user's latest rolled-back candidate's go-back (eval.canary): `lineage` (how many so far) and `to`
    (the incumbent's AdapterRef JSON, empty: the base); the trainer builds on it from then on. No TTL."""
    return f"{PREFIX}:adapter-go-back:{tenant}"


def canary_turns(tenant: str, version: int) -> str:
    """List: `<arm> <turn id>` of each turn served while candidate `version` was judged (arm: candidate or
    incumbent), in order; what the canary workflow judges. Turn ids only; expires with the turn data."""
    return f"{PREFIX}:canary:{tenant}:v{version}:turns"


def canary_arms(tenant: str, version: int) -> str:
    """Hash: the arm each turn of the user took while `version` was their candidate, by turn id (a retried
    generation takes the same one); its length counts the turns. Expires with the turn data."""
    return f"{PREFIX}:canary:{tenant}:v{version}:arms"


def canary_pairs(tenant: str, version: int, run: str, cursor: int) -> str:
    """One canary round's answer pairs (candidate and incumbent, with the conversation), between its two activities
    (the policy pool writes, the judge pool reads). Sealed under encryption; expires after a day."""
    return f"{PREFIX}:canary:{tenant}:v{version}:pairs:{run}:{cursor}"


def no_train(turn_id: str) -> str:
    """Set when a turn's request came from an opted-out user or key: it is served, never judged into a sample."""
    return f"{PREFIX}:notrain:{turn_id}"


OPT_OUT_USERS = f"{PREFIX}:optout:users"
"""Set of user pseudonyms opted out of training."""
OPT_OUT_KEYS = f"{PREFIX}:optout:keys"
"""Set of API key ids opted out of training."""


def forgotten(tenant: str) -> str:
    """Tombstone of a forgotten user (the time it was forgotten, nothing else): a publication racing the forget
    refuses to write (store.samples), and forgetting again is a no-op. Cleared by a new key for the same id."""
    return f"{PREFIX}:forgotten:{tenant}"


def adapter_forgotten(tenant: str) -> str:
    """When the user's adapters were last forgotten (Redis time, nothing else): kept when a new key clears the
    tombstone, so an adapter the trainer began before that forget is never published for the new user."""
    return f"{PREFIX}:adapter-forgotten:{tenant}"


def claim_drops(claim: str) -> str:
    """Hash of the stale entries one training claim dropped (`source\tentry id` -> their group's hash) and its newest
    attempt (`@attempt`), for its retries: a retried claim names and counts them again, so each drop is named on
    disk once and counted once (activities.stale_screen)."""
    return f"{PREFIX}:claim-drops:{claim}"


def forgotten_entries(source: str) -> str:
    """Set of sample-stream entry ids deleted by a forget while the trainer had them claimed: the train step skips
    them instead of failing on a missing sample; acknowledging removes them."""
    return f"{PREFIX}:forgotten-entries:{source}"
