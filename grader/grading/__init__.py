"""The grading stage: a class graded into OUT, between the pipeline's stages and the commands.

One submission's steps in a grading process (`steps`: read, load, finish, fail), the one place
a result is finished (`finish`), the one writer of a student's folder in OUT (`writer`), OUT's
bookkeeping across runs (`out`: earlier results, locks, folders set aside), the class files
(`class_files`), what a run says to the instructor (`notices`), what it did (`summary`), and
the run itself (`run`). Commands wire arguments to it and print what it returns."""
