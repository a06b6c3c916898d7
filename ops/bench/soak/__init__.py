"""`slca bench soak`: legal and hostile traffic against `slca up` for minutes, and its verdict. `main` is the plan,
`traffic` the clients and samplers, `report` the figures and the verdict."""
