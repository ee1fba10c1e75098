/*
 * report.c: mscclppCommReport, the on-demand hang report. The table is made
 * in Go (capiCommReportText, capi/report.go, from impl's Comm.Report); this
 * writes it to the caller's FILE*, which only C can. Not a tool-interceptable
 * entry point: like the data path it is outside the tool stack's list.
 */
#include <stdio.h>
#include <stdlib.h>

#include "_cgo_export.h"
#include "../impl/status/errs.h" /* the fork check, error records */

mscclppResult_t mscclppCommReport(mscclppComm_t comm, FILE* f)
{
  if (errForked("mscclppCommReport")) return mscclppInvalidUsage;
  char* text = NULL;
  mscclppResult_t r = (mscclppResult_t)capiCommReportText(comm, f != NULL, &text);
  if (r != mscclppSuccess) return r;
  int bad = fputs(text, f) == EOF || fflush(f) != 0;
  free(text);
  if (bad) return (mscclppResult_t)errFail(NULL, mscclppSystemError, "mscclppCommReport: writing the report failed");
  return mscclppSuccess;
}
