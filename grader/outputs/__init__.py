"""Stage 5, outputs: what a result is written as: results.json, the HTML report and its pictures,
the class index, the terminal, CSV and Gradescope exports."""
