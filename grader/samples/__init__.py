"""Sample submissions used by `torchgrade demo` (the correct one and the stub are built from solutions/ and exercises/)."""
