-- ip_allowlist_take_turns(): created here at first; its one definition is migrations/functions/ip_allowlist_take_turns.sql (docs/adr/0084).

-- trigger ip_allowlist_take_turns: created with its function, migrations/functions/ip_allowlist_take_turns.sql (docs/adr/0084).
