"""learner component."""
