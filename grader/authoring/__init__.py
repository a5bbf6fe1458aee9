"""Tools for course authors: scaffolding an exercise (`new-exercise`), proving its checks."""
