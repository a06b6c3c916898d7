"""The warm start composed: demonstrations from the sim's task packs (`data`) fed to the learner's SFT loop
(`learner.sft`), and the `slca sft` / `slca bench sft` commands (`cli`)."""
