-- Where the running attempt's events begin, so an end from outside (recovery, handback, cancel)
-- closes only an attempt that wrote something and has not ended itself (AS-14).
ALTER TABLE runs ADD COLUMN attempt_first_sequence bigint NOT NULL DEFAULT 0;
