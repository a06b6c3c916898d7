"""`slca bench learn-vs-trl` (issue 40 item 1): learning per hour against TRL. slca's `slca train` and TRL's
`GRPOTrainer` from the same warm start, on the same training tasks, with the same reward and the same minutes, in
blocks of two arms (order rotated by the block's number), each arm's model saved at checkpoints on one clock and
judged greedily on the training probe and the test split. `arms`: what each arm trains with and the block's plan;
`capture`: slca's published versions taken at the marks; `slca_arm`, `trl_arm`: one arm's training each (`child`:
stopping a training process, its log's tail); `main`: the block; `report`: the rule, the verdict and the results;
`flags`: the command's flags."""
