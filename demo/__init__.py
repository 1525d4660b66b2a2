"""`python manage.py demo` (`make demo`): the main job end to end on the embedded defaults.

`seed` plays the API's part (rows, uploads, the jobs it would send) with the
sample photos that ship in packages; `report` reads the results back from the rows
and storage and writes `var/demo/report.html` and `var/demo/contact_sheet.png`.
"""
