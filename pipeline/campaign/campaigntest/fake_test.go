package campaigntest

import (
	"testing"

	"github.com/chatguard/chatguard/pipeline"
)

func TestFakeConforms(t *testing.T) {
	t.Parallel()
	Run(t, func(*testing.T) pipeline.CampaignCounter { return &Fake{} })
}
