-- Up Migration
-- The library's record of the sagas that ended holding their key's answer without holding their
-- intent any more (undone and freed, expired before their write, an entity operation done): a retry
-- of such a key is answered from its own saga, even after another request took the intent. Redis
-- keeps the same record beside the intent (its `d{<tag>}` set); this table is the truth the gate
-- restores it from after Redis lost its data (src/db/ended-sessions.ts). One row per intent and
-- session tag (the first 11 characters of the saga's session id, as the entity marker keeps them);
-- rows older than IDEMPOTENCY_RETENTION_MS are purged with the step idempotency records.
CREATE TABLE IF NOT EXISTS ended_sessions (
  intent_key  text        NOT NULL,
  session_tag text        NOT NULL,
  ended_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (intent_key, session_tag)
);
CREATE INDEX IF NOT EXISTS ended_sessions_ended_at ON ended_sessions (ended_at);
