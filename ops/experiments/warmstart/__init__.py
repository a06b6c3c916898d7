"""The warm start, its one home: demonstrations from the sim's task packs (`data`) fed to the learner's SFT loop
(`learner.sft`), the `slca sft` command (`cli`; `slca bench sft` is `ops.bench.sft`), and the warm-started model
(`model`: where it is, and making it first when `slca up` finds none)."""
